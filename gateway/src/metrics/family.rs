//! A labelled counter family that finds each series by its exact label values.
//!
//! prometheus 0.13's `IntCounterVec` keys its children by an FNV hash of the label values
//! written one after the other with no separator, and trusts that hash: it never compares
//! the values. `{tenant="ab", model="c"}` and `{tenant="a", model="bc"}` hash alike (as does
//! any real 64-bit collision), so the second set's requests were counted in the first set's
//! series and the second never appeared. Tenant ids and model names are free text chosen by
//! operators, so `requests_total` uses this family instead: one `IntCounter` per label set,
//! found through a hash and then compared value by value, and exported as one family.

use parking_lot::RwLock;
use prometheus::core::{Collector, Desc, Metric};
use prometheus::proto::{MetricFamily, MetricType};
use prometheus::{IntCounter, Opts};
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

/// Most label sets kept; past it a new set still counts, in a series that is not exported.
const MAX_SERIES: usize = 16_384;

/// `N` labels per series. Clones share the series, as prometheus' vectors do.
#[derive(Clone)]
pub(crate) struct CounterFamily<const N: usize> {
    inner: Arc<Inner<N>>,
}

struct Inner<const N: usize> {
    /// Its `variable_labels` are the label names, in the order values are given.
    desc: Desc,
    children: RwLock<Children<N>>,
    hasher: foldhash::fast::FixedState,
}

#[derive(Default)]
struct Children<const N: usize> {
    /// Series by a hash of their label values; a bucket holds every set with that hash.
    by_hash: HashMap<u64, Vec<Child<N>>, foldhash::fast::RandomState>,
    len: usize,
}

struct Child<const N: usize> {
    values: [Box<str>; N],
    counter: IntCounter,
}

impl<const N: usize> Children<N> {
    fn find(&self, key: u64, values: [&str; N]) -> Option<&IntCounter> {
        let bucket = self.by_hash.get(&key)?;
        let child = bucket
            .iter()
            .find(|c| c.values.iter().map(|v| &**v).eq(values))?;
        Some(&child.counter)
    }
}

impl<const N: usize> CounterFamily<N> {
    /// A family `name` with `help` and the label names `labels` (validated as prometheus
    /// validates them).
    pub(crate) fn new(name: &str, help: &str, labels: [&str; N]) -> prometheus::Result<Self> {
        let desc = Desc::new(
            name.to_string(),
            help.to_string(),
            labels.map(str::to_string).to_vec(),
            HashMap::new(),
        )?;
        Ok(Self {
            inner: Arc::new(Inner {
                desc,
                children: RwLock::new(Children::default()),
                hasher: foldhash::fast::FixedState::default(),
            }),
        })
    }

    /// The series for `values` (in the order of the label names), created on first use.
    pub(crate) fn with_label_values(&self, values: [&str; N]) -> IntCounter {
        let inner = &*self.inner;
        let key = inner.hasher.hash_one(values);
        if let Some(c) = inner.children.read().find(key, values) {
            return c.clone();
        }
        let mut children = inner.children.write();
        if let Some(c) = children.find(key, values) {
            return c.clone();
        }
        let labels = inner
            .desc
            .variable_labels
            .iter()
            .zip(values)
            .map(|(n, v)| (n.clone(), v.to_string()))
            .collect();
        let opts =
            Opts::new(inner.desc.fq_name.clone(), inner.desc.help.clone()).const_labels(labels);
        let counter = IntCounter::with_opts(opts).expect("label names validated by new");
        if children.len < MAX_SERIES {
            children.len += 1;
            children.by_hash.entry(key).or_default().push(Child {
                values: values.map(Box::from),
                counter: counter.clone(),
            });
        }
        counter
    }
}

impl<const N: usize> Collector for CounterFamily<N> {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.inner.desc]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut family = MetricFamily::default();
        family.set_name(self.inner.desc.fq_name.clone());
        family.set_help(self.inner.desc.help.clone());
        family.set_field_type(MetricType::COUNTER);
        let children = self.inner.children.read();
        for c in children.by_hash.values().flatten() {
            family.mut_metric().push(c.counter.metric());
        }
        vec![family]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(f: &CounterFamily<2>, a: &str, b: &str) -> Option<u64> {
        let fam = f.collect().pop()?;
        fam.get_metric()
            .iter()
            .find(|m| {
                let l = m.get_label();
                l.len() == 2 && l[0].get_value() == a && l[1].get_value() == b
            })
            .map(|m| m.get_counter().get_value() as u64)
    }

    #[test]
    fn label_sets_that_concatenate_alike_are_separate_series() {
        // Not a `warmpath_gateway_` name: stack/tests/docs_metrics.rs reads every metric
        // file's lowercase `_total` literals as exported names (a digit keeps this one out).
        let f = CounterFamily::new("t1_total", "help", ["a", "b"]).unwrap();
        f.with_label_values(["ab", "c"]).inc();
        f.with_label_values(["ab", "c"]).inc();
        f.with_label_values(["a", "bc"]).inc();
        assert_eq!(value(&f, "ab", "c"), Some(2));
        assert_eq!(value(&f, "a", "bc"), Some(1));
        assert_eq!(f.collect()[0].get_metric().len(), 2);
    }

    #[test]
    fn a_lookup_compares_values_within_a_bucket() {
        // Two label sets in one bucket, as a real hash collision puts them.
        let counter = |n: u64| {
            let c = IntCounter::new("c", "c").unwrap();
            c.inc_by(n);
            c
        };
        let mut ch = Children::<2>::default();
        for (values, n) in [(["x", "1"], 1), (["y", "2"], 2)] {
            ch.by_hash.entry(7).or_default().push(Child {
                values: values.map(Box::from),
                counter: counter(n),
            });
        }
        assert_eq!(ch.find(7, ["y", "2"]).map(IntCounter::get), Some(2));
        assert_eq!(ch.find(7, ["x", "1"]).map(IntCounter::get), Some(1));
        assert!(ch.find(7, ["x", "2"]).is_none());
        assert!(ch.find(8, ["x", "1"]).is_none());
    }
}
