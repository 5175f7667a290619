//! `replica tokenize`: prints the token ids of a text as a JSON array.

use super::ModelArg;
use clap::Args;
use warmpath_engine::{Engine, EngineOptions};

/// Arguments of `replica tokenize`.
#[derive(Args, Debug)]
pub struct TokenizeArgs {
    #[command(flatten)]
    model: ModelArg,
    /// Text to tokenize (special-token texts map to their ids).
    #[arg(long)]
    text: String,
    /// Prepend BOS when the model asks for it.
    #[arg(long)]
    add_special: bool,
}

/// Runs the subcommand, returning the JSON line to print.
pub fn run(args: &TokenizeArgs) -> anyhow::Result<String> {
    let opts = EngineOptions {
        kv_pages: 1,
        threads: 1,
        ..EngineOptions::default()
    };
    let engine = Engine::load(&args.model.source(), &opts)?;
    let ids: Vec<u32> = engine
        .tokenizer()
        .encode(&args.text, args.add_special)?
        .iter()
        .map(|t| t.0)
        .collect();
    Ok(serde_json::to_string(&ids)?)
}
