//! The tenant table: authentication, the verified-key cache, salts, reloads.

use super::*;

#[test]
fn a_fleet_gateway_enforces_its_share_of_each_limit_alone() {
    let limits = TenantLimits {
        requests_per_minute: 600,
        request_burst: 10,
        tokens_per_minute: 1000,
        max_concurrent: 1,
    };
    let mut state = StateConfig::default();
    assert_eq!(local_share(&limits, &state), limits);
    state.backend = StateBackend::Redis;
    state.gateway_count = 3;
    let share = local_share(&limits, &state);
    assert_eq!(share.requests_per_minute, 200);
    assert_eq!(share.request_burst, 4);
    assert_eq!(share.tokens_per_minute, 334);
    // Never rounded down to 0, which would mean unlimited.
    assert_eq!(share.max_concurrent, 1);
    assert_eq!(
        local_share(&TenantLimits::default(), &state),
        TenantLimits::default()
    );
}

fn cfg() -> Config {
    let mut c = Config::default();
    c.auth.salt_secret = "0123456789abcdef-secret".into();
    c.tenants = vec![
        TenantConfig {
            id: "a".into(),
            api_key_sha256: vec![hash_key("key-a")],
            models: vec!["m1".into()],
            limits: TenantLimits::default(),
            regions: Vec::new(),
            flow: Default::default(),
        },
        TenantConfig {
            id: "b".into(),
            api_key_sha256: vec![hash_key("key-b")],
            models: vec!["*".into()],
            limits: TenantLimits::default(),
            regions: Vec::new(),
            flow: Default::default(),
        },
    ];
    c
}

#[test]
fn authenticates_by_hashed_key() {
    let t = TenantTable::build(&cfg(), None);
    assert_eq!(&*t.authenticate(Some(b"Bearer key-a")).unwrap().id, "a");
    assert_eq!(&*t.authenticate(Some(b"bearer key-b")).unwrap().id, "b");
    assert!(t.authenticate(Some(b"Bearer key-c")).is_err());
    assert!(t.authenticate(Some(b"key-a")).is_err());
    assert!(t.authenticate(None).is_err());
    assert!(t.authenticate(Some(b"Bearer key-a extra")).is_err());
}

#[test]
fn only_matched_keys_are_remembered_and_a_reload_forgets_them() {
    let t = TenantTable::build(&cfg(), None);
    assert_eq!(t.verified_len(), 0);
    for _ in 0..3 {
        assert_eq!(&*t.authenticate(Some(b"Bearer key-a")).unwrap().id, "a");
        assert!(t.authenticate(Some(b"Bearer key-x")).is_err());
    }
    assert_eq!(t.verified_len(), 1);
    assert_eq!(&*t.authenticate(Some(b"Bearer key-b")).unwrap().id, "b");
    // A remembered key maps to its own tenant, not to the one verified last.
    assert_eq!(&*t.authenticate(Some(b"Bearer key-a")).unwrap().id, "a");
    assert_eq!(t.verified_len(), 2);
    // Key-a removed from the config: the rebuilt table rejects it at once.
    let mut c = cfg();
    c.tenants[0].api_key_sha256 = vec![hash_key("key-a2")];
    let t2 = TenantTable::build(&c, Some(&t));
    assert!(t2.authenticate(Some(b"Bearer key-a")).is_err());
    assert_eq!(&*t2.authenticate(Some(b"Bearer key-a2")).unwrap().id, "a");
    // Two tables draw different PRF keys.
    assert_ne!(t.prf(b"key-a"), t2.prf(b"key-a"));
}

#[test]
fn allowlist_and_salts() {
    let t = TenantTable::build(&cfg(), None);
    let a = t.authenticate(Some(b"Bearer key-a")).unwrap();
    let b = t.authenticate(Some(b"Bearer key-b")).unwrap();
    assert!(a.allows("m1") && !a.allows("m2"));
    assert!(b.allows("anything"));
    assert_ne!(a.salt, b.salt);
    assert_eq!(a.salt, derive_salt("0123456789abcdef-secret", "a"));
    assert_ne!(a.salt, derive_salt("another-secret-0123", "a"));
    assert_eq!(a.salt.as_str().len(), 32);
}

#[test]
fn reload_keeps_unchanged_limiter_state() {
    let c = cfg();
    let t1 = TenantTable::build(&c, None);
    let t2 = TenantTable::build(&c, Some(&t1));
    let a1 = t1.authenticate(Some(b"Bearer key-a")).unwrap();
    let a2 = t2.authenticate(Some(b"Bearer key-a")).unwrap();
    assert!(Arc::ptr_eq(&a1, &a2));
}

#[test]
fn reload_that_adds_a_key_keeps_the_spent_allowance() {
    let mut c = cfg();
    c.tenants[0].limits = TenantLimits {
        requests_per_minute: 1,
        request_burst: 1,
        max_concurrent: 1,
        ..TenantLimits::default()
    };
    let t1 = TenantTable::build(&c, None);
    let a1 = t1.authenticate(Some(b"Bearer key-a")).unwrap();
    let now = std::time::Instant::now();
    let permit = limits::reserve(&a1.limiter, "t", 1, now).unwrap();
    // A new key for tenant a: the tenant is rebuilt, its limiter state is not.
    c.tenants[0].api_key_sha256.push(hash_key("key-a2"));
    let t2 = TenantTable::build(&c, Some(&t1));
    let a2 = t2.authenticate(Some(b"Bearer key-a2")).unwrap();
    assert!(!Arc::ptr_eq(&a1, &a2));
    assert_eq!(a2.limiter.in_flight(), 1);
    assert!(
        limits::reserve(&a2.limiter, "t", 1, now).is_err(),
        "no fresh burst"
    );
    drop(permit);
    assert_eq!(a2.limiter.in_flight(), 0);
    // New limits: rescaled, still spent (1 of 1 used, so 2 of 2 used).
    c.tenants[0].limits.request_burst = 2;
    c.tenants[0].limits.requests_per_minute = 2;
    let t3 = TenantTable::build(&c, Some(&t2));
    let a3 = t3.authenticate(Some(b"Bearer key-a")).unwrap();
    assert!(
        limits::reserve(&a3.limiter, "t", 1, now).is_err(),
        "no fresh burst"
    );
}
