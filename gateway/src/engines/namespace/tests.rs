//! Pool namespaces: defaults per engine, validation naming the key, and the seeds requests
//! get (salted and adapter namespaces equal the ones the event mapper builds).

use super::*;
use crate::config::{Config, TenantConfig};
use crate::tenants::{hash_key, Tenant, TenantTable};

/// What `proxy::prepare` passes for `tenant`: its salt and its own seed of `ck`.
fn tseed<'a>(
    tenant: &'a Tenant,
    ck: &'a CheckpointId,
) -> (&'a CacheSalt, impl FnOnce() -> RootSeed + 'a) {
    (&tenant.salt, move || tenant.root_seed(ck))
}

fn pool(yaml: &str) -> PoolConfig {
    serde_yaml::from_str(yaml).expect("pool parses")
}

fn tenants() -> (Arc<Tenant>, Arc<Tenant>) {
    let mut c = Config::default();
    c.auth.enabled = true;
    c.auth.salt_secret = "0123456789abcdef-secret".into();
    c.tenants = ["a", "b"]
        .iter()
        .map(|id| TenantConfig {
            id: (*id).into(),
            api_key_sha256: vec![hash_key(&format!("key-{id}"))],
            models: vec!["*".into()],
            limits: Default::default(),
            regions: Vec::new(),
            flow: Default::default(),
        })
        .collect();
    let t = TenantTable::build(&c, None);
    let get = |id: &str| {
        t.authenticate(Some(format!("Bearer key-{id}").as_bytes()))
            .expect("key")
    };
    (get("a"), get("b"))
}

#[test]
fn salt_defaults_per_engine_and_validation_names_the_key() {
    let v = pool("{name: v, engine: vllm, upstreams: [http://127.0.0.1:1]}");
    assert_eq!(v.salt_mode(), SaltMode::PerTenant);
    assert!(EngineNamespace::of(&v).salt);
    let s = pool("{name: s, engine: sglang, upstreams: [http://127.0.0.1:1]}");
    assert_eq!(s.salt_mode(), SaltMode::None);
    let off = pool("{name: v, engine: vllm, cache_salt: none, upstreams: [http://127.0.0.1:1]}");
    assert!(!EngineNamespace::of(&off).salt);
    for (yaml, key) in [
        (
            "{name: s, engine: sglang, cache_salt: per_tenant, upstreams: [http://127.0.0.1:1]}",
            "pools[0].cache_salt",
        ),
        (
            "{name: w, engine: warmpath, lora_adapters: [x], upstreams: [http://127.0.0.1:1]}",
            "pools[0].lora_adapters",
        ),
        (
            "{name: v, engine: vllm, models: [base], lora_adapters: [sql], upstreams: [http://127.0.0.1:1]}",
            "pools[0].lora_adapters[0]",
        ),
    ] {
        match pool(yaml).validate("pools[0]") {
            Err(crate::config::error::ConfigError::Invalid { key: k, .. }) => {
                assert_eq!(k, key, "{yaml}")
            }
            other => panic!("{yaml}: {other:?}"),
        }
    }
    let ok = pool(
        "{name: v, engine: vllm, models: [base, sql], lora_adapters: [sql], upstreams: [http://127.0.0.1:1]}",
    );
    assert!(ok.validate("pools[0]").is_ok());
}

#[test]
fn seeds_follow_the_salt_and_the_adapter() {
    let (a, b) = tenants();
    let ck = CheckpointId::new("v/base");
    let ns = |salt: bool| EngineNamespace {
        salt,
        adapters: vec!["sql".to_string()].into(),
    };
    let base = HashNamespace::new(ck.clone());
    // Salted: each tenant its own namespace, the one its salted events map into.
    let salted = ns(true);
    let sa = salted.seed(&ck, "base", true, tseed(&a, &ck));
    assert_eq!(sa, base.clone().with_salt(Some(a.salt.clone())).root_seed());
    assert_ne!(sa, salted.seed(&ck, "base", true, tseed(&b, &ck)));
    // Unsalted with events: the engine shares its blocks, so do the hashes.
    let plain = ns(false);
    assert_eq!(
        plain.seed(&ck, "base", true, tseed(&a, &ck)),
        base.root_seed()
    );
    assert_eq!(
        plain.seed(&ck, "base", true, tseed(&b, &ck)),
        base.root_seed()
    );
    // Without events the routing history stays per tenant.
    assert_eq!(
        plain.seed(&ck, "base", false, tseed(&a, &ck)),
        a.root_seed(&ck)
    );
    // An adapter: its own namespace, never the base model's.
    let lora = base.clone().with_adapter(Some("sql".into()));
    assert_eq!(
        salted.seed(&ck, "sql", true, tseed(&a, &ck)),
        lora.clone().with_salt(Some(a.salt.clone())).root_seed()
    );
    assert_eq!(
        plain.seed(&ck, "sql", true, tseed(&a, &ck)),
        lora.root_seed()
    );
    assert_ne!(
        plain.seed(&ck, "sql", true, tseed(&a, &ck)),
        base.root_seed()
    );
}
