//! Property test: the response envelope's scanner against the `serde_json::Value`
//! reference, over many generated documents and broken variants of them.

use super::envelope::{body_usage, Envelope};
use super::tests::by_value;
use crate::body::scan::gen::{document, mutate, Rng};

/// Asserts that the scanner agrees with the reference; returns the agreed answer.
fn check(doc: &[u8]) -> Option<Envelope> {
    let got = Envelope::parse(doc);
    let want = by_value(doc);
    let got_tuple = got.as_ref().map(|e| (e.usage, e.error, e.choices));
    assert_eq!(got_tuple, want, "{}", doc.escape_ascii());
    got
}

/// How often each outcome came up, to show that the generator reaches them all.
#[derive(Debug, Default)]
struct Tally {
    valid: usize,
    invalid: usize,
    usage: usize,
    cached: usize,
    choices: usize,
    error: usize,
}

impl Tally {
    fn add(&mut self, env: Option<Envelope>) {
        let Some(env) = env else {
            self.invalid += 1;
            return;
        };
        self.valid += 1;
        self.usage += usize::from(env.usage.is_some());
        self.cached += usize::from(env.usage.is_some_and(|u| u.cached_tokens.is_some()));
        self.choices += usize::from(env.choices > 0);
        self.error += usize::from(env.error);
    }
}

#[test]
fn scanner_matches_a_value_lookup_on_generated_documents() {
    const DOCS: usize = 10_000;
    let mut r = Rng::new(0x9E37_79B9_7F4A_7C15);
    let (mut whole, mut broken) = (Tally::default(), Tally::default());
    for _ in 0..DOCS {
        let doc = document(&mut r);
        whole.add(check(&doc));
        for _ in 0..3 {
            let mut mutant = doc.clone();
            mutate(&mut r, &mut mutant);
            broken.add(check(&mutant));
        }
    }
    eprintln!("generated: {whole:?}\nmutated: {broken:?}");
    assert!(whole.valid > DOCS * 3 / 4, "{whole:?}");
    assert!(
        broken.valid > DOCS / 10 && broken.invalid > DOCS,
        "{broken:?}"
    );
    assert!(
        whole.usage > DOCS / 10 && whole.cached > DOCS / 100,
        "{whole:?}"
    );
    assert!(
        whole.choices > DOCS / 40 && whole.error > DOCS / 20,
        "{whole:?}"
    );
}

/// The tail-first usage reader of non-streaming bodies agrees with the reference on every
/// valid document, and answers something (no panic, no hang) for every broken one.
#[test]
fn body_usage_matches_a_value_lookup_on_valid_documents() {
    use crate::body::tail::last_members;
    const DOCS: usize = 10_000;
    let mut r = Rng::new(0x2545_F491_4F6C_DD1D);
    let (mut valid, mut found, mut broken) = (0, 0, 0);
    for _ in 0..DOCS {
        let doc = document(&mut r);
        let mut docs = vec![doc.clone()];
        for _ in 0..3 {
            let mut mutant = doc.clone();
            mutate(&mut r, &mut mutant);
            docs.push(mutant);
        }
        for doc in docs {
            let got = body_usage(&doc);
            match by_value(&doc) {
                Some((want, _, _)) => {
                    assert_eq!(got, want, "{}", doc.escape_ascii());
                    valid += 1;
                    found += usize::from(matches!(
                        last_members(&doc, 0..doc.len(), [b"usage"]),
                        Some([Some(_)])
                    ));
                }
                None => broken += 1,
            }
        }
    }
    eprintln!("valid {valid}, read from the tail {found}, broken {broken}");
    assert!(
        valid > DOCS && found > DOCS / 10 && broken > DOCS,
        "{valid} {found} {broken}"
    );
}
