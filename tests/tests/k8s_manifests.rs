//! The Kubernetes manifests (`deploy/kubernetes`), checked offline: `scripts/k8s-check.sh`
//! renders them with kustomize and validates every object against the Kubernetes API
//! schemas; this test then reads the rendered objects and checks what ties them together:
//! the gateway's config (from the ConfigMap, secrets from the Secret) is one the gateway
//! accepts, it names the replica StatefulSet's pods on their Service and port, and the
//! gateway Deployment has its fleet shape (three pods, `/ready`, a preStop, a budget), and
//! Redis and the replicas are fenced: Redis needs the gateway's ACL user, whose password
//! reaches the gateway as a file, and NetworkPolicies admit only gateways and replicas.

#![allow(clippy::unwrap_used)]

use serde_yaml::Value;
use warmpath_e2e::k8s_check::{check, object, root};

#[test]
fn manifests_render_validate_and_fit_together() {
    let objs = check(&root().join("deploy/kubernetes")).expect("the manifests validate");
    assert!(objs
        .iter()
        .all(|o| o["metadata"]["namespace"] == "warmpath" || o["kind"] == "Namespace"));

    // The gateway's config, with the Secret's values in its environment, is accepted.
    let secret = object(&objs, "Secret", "gateway-secrets");
    let env = |key: &str| {
        use base64::Engine;
        // kustomize wraps long values.
        let b64: String = secret["data"][key]
            .as_str()
            .unwrap()
            .split_whitespace()
            .collect();
        let raw = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        String::from_utf8(raw).unwrap()
    };
    let deployment = object(&objs, "Deployment", "gateway");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    for var in container["env"].as_sequence().unwrap() {
        let key = var["valueFrom"]["secretKeyRef"]["key"].as_str().unwrap();
        std::env::set_var(var["name"].as_str().unwrap(), env(key));
    }
    let cm = object(&objs, "ConfigMap", "gateway-config");
    let cfg = gateway::config::Config::from_yaml(cm["data"]["gateway.yaml"].as_str().unwrap())
        .expect("the ConfigMap's gateway.yaml parses");
    cfg.validate()
        .expect("the ConfigMap's gateway.yaml validates");
    assert_eq!(cfg.auth.salt_secret, env("salt-secret"));

    // It names every replica pod on the headless Service and the container's port.
    let sts = object(&objs, "StatefulSet", "replica");
    let service = sts["spec"]["serviceName"].as_str().unwrap();
    let n = sts["spec"]["replicas"].as_u64().unwrap();
    let port = sts["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"]
        .as_u64()
        .unwrap();
    let want: Vec<String> = (0..n)
        .map(|i| format!("http://replica-{i}.{service}:{port}"))
        .collect();
    assert_eq!(cfg.replicas, want);
    assert_eq!(
        object(&objs, "Service", service)["spec"]["clusterIP"],
        "None"
    );

    // The fleet's shape.
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/ready");
    assert!(container["lifecycle"]["preStop"].is_mapping());
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(
        grace > cfg.shutdown_grace_s,
        "the pod outlives the gateway's drain"
    );
    let pdb = object(&objs, "PodDisruptionBudget", "gateway");
    assert_eq!(pdb["spec"]["selector"], deployment["spec"]["selector"]);
    fenced(&objs, &cfg, pod, &env("redis-password"));
}

/// Redis with an ACL the gateway logs in to, and the NetworkPolicies around Redis and the
/// replicas.
fn fenced(objs: &[Value], cfg: &gateway::config::Config, pod: &Value, password: &str) {
    let url = cfg.state.url.as_deref().unwrap();
    assert!(url.starts_with("redis://gateway@"), "{url}");
    let file = cfg.state.password_file.as_deref().unwrap();
    let mount = pod["containers"][0]["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|m| file.starts_with(m["mountPath"].as_str().unwrap()))
        .expect("state.password_file is mounted");
    let volume = pod["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap();
    assert_eq!(volume["secret"]["items"][0]["key"], "redis-password");
    let acl = object(objs, "Secret", "redis-acl");
    let acl = {
        use base64::Engine;
        let b64: String = acl["data"]["users.acl"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .collect();
        let raw = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        String::from_utf8(raw).unwrap()
    };
    assert!(
        acl.contains(&format!("user gateway on >{password} ~warmpath:*")),
        "{acl}"
    );
    assert!(
        acl.contains("user default on nopass resetchannels -@all +ping"),
        "{acl}"
    );
    let redis = object(objs, "StatefulSet", "redis");
    let args = &redis["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(args.as_sequence().unwrap().iter().any(|a| a == "--aclfile"));

    let from = |target: &str| -> Vec<String> {
        let np = objs
            .iter()
            .find(|o| {
                o["kind"] == "NetworkPolicy"
                    && o["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == target
            })
            .unwrap_or_else(|| panic!("no NetworkPolicy for {target}"));
        let mut peers: Vec<String> = np["spec"]["ingress"][0]["from"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|p| {
                let name = &p["podSelector"]["matchLabels"]["app.kubernetes.io/name"];
                name.as_str().unwrap().to_string()
            })
            .collect();
        peers.sort();
        peers
    };
    assert_eq!(from("redis"), ["gateway", "replica"]);
    assert_eq!(from("replica"), ["gateway", "replica"]);
}

/// The validation is not a formality: a misspelt field in a copy of the manifests fails.
#[test]
fn an_unknown_field_fails_validation() {
    let dir = std::env::temp_dir().join(format!("warmpath-k8s-bad-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(root().join("deploy/kubernetes")).unwrap() {
        let p = entry.unwrap().path();
        if !p.is_file() {
            continue; // crds/: the vendored schemas, read from the repository
        }
        let text = std::fs::read_to_string(&p).unwrap();
        let text = text.replace("readinessProbe:", "readinesProbe:");
        std::fs::write(dir.join(p.file_name().unwrap()), text).unwrap();
    }
    let err = check(&dir).expect_err("a misspelt field is refused");
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(err.contains("readinesProbe"), "{err}");
}
