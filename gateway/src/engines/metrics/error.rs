//! Why an engine's `/metrics` page gave no load: [`MetricsError`].

/// Why a `/metrics` page gave no load.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MetricsError {
    /// The body is empty or only whitespace.
    #[error("the metrics page is empty")]
    Empty,
    /// Not the Prometheus text format.
    #[error("not Prometheus text format: {0}")]
    Syntax(String),
    /// A sample value the format checker let through that is not a number.
    #[error("metric {metric}: sample value {value:?} is not a number")]
    Value {
        /// The metric.
        metric: String,
        /// The value as written.
        value: String,
    },
    /// The page has neither the running nor the waiting gauge of the engine: another engine,
    /// or its metrics are off.
    #[error("no {dialect} load metrics ({running}, {waiting}) on the page")]
    NotThisEngine {
        /// The engine expected.
        dialect: &'static str,
        /// Its running gauge.
        running: &'static str,
        /// Its waiting gauge.
        waiting: &'static str,
    },
}
