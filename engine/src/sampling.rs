//! Token sampling: greedy, temperature, top-k, top-p, seeded; plus stop-string checks.

use serde::{Deserialize, Serialize};
use warmpath_core::rng::{Draw, RngCore, SeedableRng, SplitMix64};
use warmpath_core::TokenId;

/// How to pick the next token and when to stop.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SamplingParams {
    /// 0 means greedy.
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens (0 = all).
    pub top_k: usize,
    /// Keep the smallest set whose probability reaches `top_p` (1 = all).
    pub top_p: f32,
    /// Same seed, same tokens. `None` seeds from the clock.
    pub seed: Option<u64>,
    /// Maximum generated tokens.
    pub max_tokens: usize,
    /// Generation stops when the text contains one of these (the stop string is cut).
    pub stop: Vec<String>,
    /// Return the log-probability of each sampled token.
    pub logprobs: bool,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            seed: None,
            max_tokens: 256,
            stop: Vec::new(),
            logprobs: false,
        }
    }
}

/// Stateful sampler for one sequence.
pub struct Sampler {
    params: SamplingParams,
    rng: SplitMix64,
}

impl Sampler {
    /// A sampler for `params`.
    pub fn new(params: &SamplingParams) -> Self {
        let seed = params.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0)
        });
        Self {
            params: params.clone(),
            rng: SplitMix64::seed_from_u64(seed),
        }
    }

    /// A sampler for `params` that resumes a sequence another sampler started: the
    /// random stream is advanced past the `draws` numbers already taken, so a seeded
    /// continuation picks exactly what the uninterrupted sampler would have.
    pub fn resumed(params: &SamplingParams, draws: u64) -> Self {
        let mut s = Self::new(params);
        for _ in 0..draws {
            s.rng.next_u64();
        }
        s
    }

    /// Whether picking a token under `params` takes one random draw (else none): a
    /// resumed sequence's position in the random stream is its token count or zero.
    pub fn draws_per_token(params: &SamplingParams) -> u64 {
        u64::from(!(params.temperature <= 0.0 || params.top_k == 1))
    }

    /// Picks the next token from `logits` (greedy sampling reads the logits once; no
    /// softmax is computed).
    pub fn sample(&mut self, logits: &[f32]) -> TokenId {
        TokenId(self.pick(logits) as u32)
    }

    /// Picks the next token and returns its log-probability under the full distribution
    /// (before temperature and truncation, as OpenAI reports it).
    pub fn sample_with_logprob(&mut self, logits: &[f32]) -> (TokenId, f32) {
        let id = self.pick(logits);
        (TokenId(id as u32), log_softmax_at(logits, id))
    }

    fn pick(&mut self, logits: &[f32]) -> usize {
        if self.params.temperature <= 0.0 || self.params.top_k == 1 {
            argmax(logits)
        } else {
            self.sample_random(logits)
        }
    }

    fn sample_random(&mut self, logits: &[f32]) -> usize {
        let t = self.params.temperature;
        let mut cand: Vec<(usize, f32)> = logits.iter().copied().enumerate().collect();
        let k = self.params.top_k;
        if k > 0 && k < cand.len() {
            cand.select_nth_unstable_by(k - 1, |a, b| b.1.total_cmp(&a.1));
            cand.truncate(k);
        }
        cand.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let max = cand[0].1;
        let mut probs: Vec<f32> = cand.iter().map(|c| ((c.1 - max) / t).exp()).collect();
        let total: f32 = probs.iter().sum();
        probs.iter_mut().for_each(|p| *p /= total);
        if self.params.top_p < 1.0 {
            let mut acc = 0.0;
            let mut keep = probs.len();
            for (i, p) in probs.iter().enumerate() {
                acc += p;
                if acc >= self.params.top_p {
                    keep = i + 1;
                    break;
                }
            }
            probs.truncate(keep);
            cand.truncate(keep);
        }
        let total: f32 = probs.iter().sum();
        let mut r = self.rng.next_f32() * total;
        for (c, p) in cand.iter().zip(&probs) {
            if r < *p {
                return c.0;
            }
            r -= p;
        }
        cand[cand.len() - 1].0
    }
}

/// Whether every logit is a finite number: NaN or infinite logits mean the model's
/// output is degenerate, and nothing sampled from them is meaningful.
pub fn all_finite(logits: &[f32]) -> bool {
    logits.iter().all(|v| v.is_finite())
}

/// Index of the largest logit (the first one on ties).
pub fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best
}

fn log_softmax_at(logits: &[f32], i: usize) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|&v| ((v - max) as f64).exp()).sum();
    (logits[i] - max) - sum.ln() as f32
}

/// Finds the earliest stop string in `text`: returns the byte index where it starts.
pub fn find_stop(text: &str, stops: &[String]) -> Option<usize> {
    stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s.as_str()))
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logits() -> Vec<f32> {
        (0..100).map(|i| ((i * 37 % 23) as f32) / 5.0).collect()
    }

    #[test]
    fn greedy_picks_argmax() {
        let l = logits();
        let mut s = Sampler::new(&SamplingParams::default());
        assert_eq!(s.sample(&l).0 as usize, argmax(&l));
        let (t, lp) = s.sample_with_logprob(&l);
        assert_eq!(t.0 as usize, argmax(&l));
        let total: f64 = l.iter().map(|&v| (v as f64).exp()).sum();
        assert!((lp as f64 - (l[argmax(&l)] as f64 - total.ln())).abs() < 1e-5);
        assert_eq!(l[argmax(&l)], l.iter().copied().fold(f32::MIN, f32::max));
    }

    #[test]
    fn a_resumed_sampler_picks_what_the_uninterrupted_one_would() {
        let l = logits();
        let params = SamplingParams {
            temperature: 1.0,
            seed: Some(11),
            ..Default::default()
        };
        let mut whole = Sampler::new(&params);
        let all: Vec<TokenId> = (0..12).map(|_| whole.sample(&l)).collect();
        assert_eq!(Sampler::draws_per_token(&params), 1);
        let mut rest = Sampler::resumed(&params, 5);
        let tail: Vec<TokenId> = (0..7).map(|_| rest.sample(&l)).collect();
        assert_eq!(tail, all[5..]);
        let mut wrong = Sampler::resumed(&params, 4);
        let off: Vec<TokenId> = (0..7).map(|_| wrong.sample(&l)).collect();
        assert_ne!(off, all[5..], "the position in the random stream matters");
        assert_eq!(Sampler::draws_per_token(&SamplingParams::default()), 0);
    }

    #[test]
    fn same_seed_same_tokens_and_top_k_limits_choices() {
        let l = logits();
        let p = SamplingParams {
            temperature: 1.0,
            top_k: 5,
            seed: Some(7),
            ..Default::default()
        };
        let (mut a, mut b) = (Sampler::new(&p), Sampler::new(&p));
        let xa: Vec<_> = (0..50).map(|_| a.sample(&l)).collect();
        let xb: Vec<_> = (0..50).map(|_| b.sample(&l)).collect();
        assert_eq!(xa, xb);
        let mut sorted = l.clone();
        sorted.sort_by(|a, b| b.total_cmp(a));
        assert!(xa.iter().all(|t| l[t.0 as usize] >= sorted[4]));
        let distinct: std::collections::HashSet<_> = xa.iter().collect();
        assert!(distinct.len() > 1, "temperature 1 should vary");
    }

    #[test]
    fn tiny_top_p_is_greedy() {
        let l = logits();
        let p = SamplingParams {
            temperature: 1.0,
            top_p: 1e-6,
            seed: Some(1),
            ..Default::default()
        };
        let mut s = Sampler::new(&p);
        for _ in 0..20 {
            assert_eq!(s.sample(&l).0 as usize, argmax(&l));
        }
    }

    #[test]
    fn non_finite_logits_are_detected() {
        let mut l = logits();
        assert!(all_finite(&l));
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            l[17] = bad;
            assert!(!all_finite(&l), "{bad}");
        }
    }

    #[test]
    fn stop_strings_found_earliest() {
        let stops = vec!["END".to_string(), "\n\n".to_string()];
        assert_eq!(find_stop("abc\n\ndefEND", &stops), Some(3));
        assert_eq!(find_stop("abc", &stops), None);
    }
}
