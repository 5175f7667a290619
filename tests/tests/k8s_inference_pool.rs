//! The inference-pool overlay (`deploy/inference-pool`: an `InferencePool` of the replica
//! pods, Warmpath's Endpoint Picker Deployment and Service, discovery RBAC), checked
//! offline like the base: `scripts/k8s-check.sh` renders it with kustomize, validates the
//! InferencePool against the vendored CRD schema (`deploy/kubernetes/crds`) and every
//! other object, and the CRD itself, against the Kubernetes API schemas. This test then
//! checks what ties them together: the pool selects the replica pods on their port, names
//! the EPP's Service and gRPC port, the EPP listens there with a config the gateway accepts
//! that discovers this pool, and its service account may read what discovery reads.

#![allow(clippy::unwrap_used)]

use serde_yaml::Value;
use warmpath_e2e::k8s_check::{check, object, root};

fn secret_value(objs: &[Value], key: &str) -> String {
    use base64::Engine;
    let b64: String = object(objs, "Secret", "gateway-secrets")["data"][key]
        .as_str()
        .unwrap()
        .split_whitespace()
        .collect();
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap(),
    )
    .unwrap()
}

#[test]
fn the_inference_pool_overlay_validates_and_fits_together() {
    let objs = check(&root().join("deploy/inference-pool")).expect("the overlay validates");
    // The base is all there too, in the same namespace.
    object(&objs, "Deployment", "gateway");
    assert!(objs
        .iter()
        .all(|o| o["metadata"]["namespace"] == "warmpath" || o["kind"] == "Namespace"));

    // The pool selects the replica pods, on their container port.
    let pool = object(&objs, "InferencePool", "replica");
    assert_eq!(pool["apiVersion"], "inference.networking.k8s.io/v1");
    let sts = object(&objs, "StatefulSet", "replica");
    let labels = sts["spec"]["template"]["metadata"]["labels"]
        .as_mapping()
        .unwrap();
    let selector = pool["spec"]["selector"]["matchLabels"]
        .as_mapping()
        .unwrap();
    assert!(!selector.is_empty());
    for (k, v) in selector {
        assert_eq!(
            labels.get(k),
            Some(v),
            "the pool's selector {k:?} picks the replica pods"
        );
    }
    let replica_port = &sts["spec"]["template"]["spec"]["containers"][0]["ports"][0];
    assert_eq!(
        pool["spec"]["targetPorts"][0]["number"],
        replica_port["containerPort"]
    );

    // It names the EPP's Service and gRPC port, which reach the EPP container's port.
    let epp_ref = &pool["spec"]["endpointPickerRef"];
    let svc = object(&objs, "Service", epp_ref["name"].as_str().unwrap());
    let grpc = svc["spec"]["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|p| p["port"] == epp_ref["port"]["number"])
        .expect("the Service has the pool's EPP port");
    assert_eq!(grpc["port"], 9002, "the reference EPP's port");
    assert_eq!(grpc["appProtocol"], "kubernetes.io/h2c");
    let epp = object(&objs, "Deployment", "warmpath-epp");
    assert_eq!(
        svc["spec"]["selector"],
        epp["spec"]["template"]["metadata"]["labels"]
    );
    let pod = &epp["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(container["args"][0], "epp");
    let cport = container["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|p| p["name"] == grpc["targetPort"])
        .expect("the Service's targetPort is a container port");
    assert_eq!(cport["containerPort"], 9002);

    // The EPP's config (secrets from the Secret) is one the gateway accepts; it listens
    // on that port and discovers this pool.
    for var in container["env"].as_sequence().unwrap() {
        let key = var["valueFrom"]["secretKeyRef"]["key"].as_str().unwrap();
        std::env::set_var(var["name"].as_str().unwrap(), secret_value(&objs, key));
    }
    let cm = object(&objs, "ConfigMap", "epp-config");
    let text = cm["data"]["epp.yaml"].as_str().unwrap();
    let mut yaml: Value = serde_yaml::from_str(text).unwrap();
    assert_eq!(yaml["epp"]["listen"], "0.0.0.0:9002");
    let cfg = match gateway::config::Config::from_yaml(text) {
        Ok(c) => c,
        // `epp:` belongs to the EPP mode; a build without it reads the rest.
        Err(e) if e.to_string().contains("unknown field `epp`") => {
            yaml.as_mapping_mut().unwrap().remove("epp");
            gateway::config::Config::from_yaml(&serde_yaml::to_string(&yaml).unwrap()).unwrap()
        }
        Err(e) => panic!("the EPP's config parses: {e}"),
    };
    cfg.validate().expect("the EPP's config validates");
    let discovery = cfg.pools[0]
        .discovery
        .as_ref()
        .expect("the pool is discovered");
    match discovery {
        gateway::config::DiscoveryConfig::Kubernetes(k) => {
            assert_eq!(
                k.inference_pool.as_deref(),
                pool["metadata"]["name"].as_str()
            );
        }
        other => panic!("{other:?}"),
    }
    let mount = &container["volumeMounts"][0];
    assert_eq!(
        container["args"][2],
        format!("{}/epp.yaml", mount["mountPath"].as_str().unwrap())
    );

    // Its service account may get, list and watch what discovery reads, here only.
    let sa = pod["serviceAccountName"].as_str().unwrap();
    let binding = object(&objs, "RoleBinding", "warmpath-discovery");
    assert_eq!(binding["subjects"][0]["name"], sa);
    let role = object(&objs, "Role", binding["roleRef"]["name"].as_str().unwrap());
    for (group, resource) in [
        ("inference.networking.k8s.io", "inferencepools"),
        ("", "pods"),
        ("discovery.k8s.io", "endpointslices"),
    ] {
        let rule = role["rules"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|r| {
                r["apiGroups"][0] == group
                    && r["resources"]
                        .as_sequence()
                        .unwrap()
                        .iter()
                        .any(|x| x == resource)
            })
            .unwrap_or_else(|| panic!("no rule for {resource}"));
        for verb in ["get", "list", "watch"] {
            assert!(
                rule["verbs"]
                    .as_sequence()
                    .unwrap()
                    .iter()
                    .any(|v| v == verb),
                "{resource}: {verb}"
            );
        }
    }
}

/// The CRD check is not a formality: a misspelt and an out-of-enum field of the
/// InferencePool, in a copy of the manifests, fail naming them.
#[test]
fn a_bad_inference_pool_fails_validation() {
    let dir = std::env::temp_dir().join(format!("warmpath-k8s-ip-bad-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for sub in ["kubernetes", "inference-pool"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        for entry in std::fs::read_dir(root().join("deploy").join(sub)).unwrap() {
            let p = entry.unwrap().path();
            if p.is_file() {
                let text = std::fs::read_to_string(&p).unwrap();
                let text = text
                    .replace("targetPorts:", "targetPort:")
                    .replace("failureMode: FailClose", "failureMode: FailShut");
                std::fs::write(dir.join(sub).join(p.file_name().unwrap()), text).unwrap();
            }
        }
    }
    let err = check(&dir.join("inference-pool")).expect_err("a bad InferencePool is refused");
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(err.contains("'targetPort' was unexpected"), "{err}");
    assert!(err.contains("'FailShut' is not one of"), "{err}");
}
