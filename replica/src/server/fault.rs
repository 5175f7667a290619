//! Test-only fault hooks, all off by default and hidden from `--help`.
//!
//! `--fault-nan-logits-after N` ([`NanFault`]): the first request asking for more than one
//! token sees NaN logits after it has generated N tokens, once. One-token requests (the
//! gateway's health probes) are left alone so the fault lands on the test's request. It
//! exercises the degenerate-output guard (issue #25, matrix row C11) end to end without
//! corrupting a model file: that request fails, later ones are served.

/// The message a request gets when its logits were NaN or infinite.
pub const DEGENERATE_MESSAGE: &str = "degenerate output: the model produced NaN or infinite logits";

/// The NaN-logits hook: `None` when off.
#[derive(Debug, Default)]
pub struct NanFault {
    /// Generated tokens after which it fires; `None` when off or already fired.
    after: Option<usize>,
}

impl NanFault {
    /// Fires once, after `after` generated tokens (`None`: never).
    pub fn new(after: Option<u64>) -> Self {
        Self {
            after: after.map(|a| usize::try_from(a).unwrap_or(usize::MAX)),
        }
    }

    /// Before sampling a sequence that has `generated` tokens out of `max_new`: NaN
    /// logits of length `n` when the fault fires now.
    pub fn fire(&mut self, generated: usize, max_new: usize, n: usize) -> Option<Vec<f32>> {
        if max_new > 1 && self.after == Some(generated) {
            self.after = None;
            Some(vec![f32::NAN; n])
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::NanFault;

    #[test]
    fn fires_once_after_n_steps_and_never_when_off() {
        let mut f = NanFault::new(Some(2));
        // A one-token request (a health probe) is left alone.
        assert!(f.fire(2, 1, 3).is_none());
        let fired: Vec<bool> = (0..4).map(|g| f.fire(g, 8, 3).is_some()).collect();
        assert_eq!(fired, [false, false, true, false]);
        assert!(f.fire(2, 8, 3).is_none(), "fires once");
        let mut off = NanFault::new(None);
        assert!((0..100).all(|g| off.fire(g, 8, 3).is_none()));
    }
}
