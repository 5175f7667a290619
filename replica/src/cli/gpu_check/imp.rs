//! The measurements of `replica gpu-check` (feature `cuda`).

use super::common::{decode_floor_tok_s, parse_sizes, rel_err, GpuCheckArgs};
use std::fmt::Write as _;
use std::time::Instant;
use warmpath_core::TokenId;
use warmpath_engine::cuda::{copy_bandwidth, device_name, probe, weight_bytes_per_step};
use warmpath_engine::sampling::argmax;
use warmpath_engine::{Device, Engine, EngineOptions, ModelSource, PageId, StepItem};

/// One line of the final table.
struct Row {
    model: String,
    metric: String,
    value: String,
    reference: String,
    verdict: String,
}

/// Runs the check; returns the report, ending with the table.
pub fn run(args: &GpuCheckArgs) -> anyhow::Result<String> {
    let device: Device = args.device.parse()?;
    let Device::Cuda(ordinal) = device else {
        anyhow::bail!("gpu-check needs a CUDA device, e.g. --device cuda:0");
    };
    // Fail at once, before any model is built, on a machine without a usable GPU.
    probe(ordinal)?;
    let batches = parse_sizes(&args.batches)?;
    let gpu = device_name(ordinal)?;
    let bw = copy_bandwidth(ordinal, 1 << 30, 5)?;
    progress(&format!(
        "{gpu} ({device}): copy bandwidth {:.0} GB/s",
        bw / 1e9
    ));
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for model in args
        .models
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
    {
        let src: ModelSource = match model.parse() {
            Ok(s) => s,
            Err(never) => match never {},
        };
        check_model(
            args,
            &src,
            model,
            device,
            &batches,
            bw,
            &mut rows,
            &mut failures,
        )?;
    }
    let mut out = format!(
        "gpu-check: {gpu} ({device}), copy bandwidth {:.0} GB/s (read+write)\n\n",
        bw / 1e9
    );
    out.push_str(&table(&rows));
    if !failures.is_empty() {
        println!("{out}");
        anyhow::bail!("gpu-check FAILED: {}", failures.join("; "));
    }
    Ok(out)
}

fn progress(msg: &str) {
    eprintln!("[gpu-check] {msg}");
}

/// Token ids spread over the vocabulary (content does not change the cost).
fn tokens(n: usize, salt: u32, vocab: usize) -> Vec<TokenId> {
    (0..n as u32)
        .map(|i| TokenId(((i + salt).wrapping_mul(2_654_435_761) >> 7) % vocab as u32))
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn check_model(
    args: &GpuCheckArgs,
    src: &ModelSource,
    name: &str,
    device: Device,
    batches: &[usize],
    bw: f64,
    rows: &mut Vec<Row>,
    failures: &mut Vec<String>,
) -> anyhow::Result<()> {
    let base = EngineOptions {
        threads: args.threads,
        ..EngineOptions::default()
    };
    let bs = base.block_size.get();
    let max_batch = batches.iter().copied().max().unwrap_or(1);
    let per_seq = (args.context + args.decode_steps + 4).div_ceil(bs);
    let prefill_pages = args.prefill_batch * args.prompt_tokens.div_ceil(bs);
    let gpu_pages = (max_batch * per_seq).max(prefill_pages).max(CHECK_PAGES);
    let t0 = Instant::now();
    let mut gpu = Engine::load_on(
        src,
        &EngineOptions {
            kv_pages: gpu_pages,
            ..base.clone()
        },
        device,
    )?;
    let cpu_opts = EngineOptions {
        kv_pages: CHECK_PAGES,
        ..base
    };
    let mut cpu = Engine::load(src, &cpu_opts)?;
    let mut reference = Engine::load_f32_reference(src, &cpu_opts)?;
    let cfg = gpu.config().clone();
    progress(&format!(
        "{name}: loaded on {}, cpu and cpu f32 in {:.1}s ({gpu_pages} GPU pages)",
        gpu.device(),
        t0.elapsed().as_secs_f64()
    ));
    let row = |metric: String, value: String, reference: String, verdict: String| Row {
        model: name.to_string(),
        metric,
        value,
        reference,
        verdict,
    };

    // (1) Correctness: gated against the exact f32 reference; the quantised CPU engine
    // (8-bit activations) is shown with its own distance to the reference.
    let [vs_ref, vs_cpu, cpu_ref] = compare(&mut [&mut reference, &mut cpu, &mut gpu])?;
    drop((cpu, reference));
    for (what, g, q, c) in [
        ("prefill", vs_ref.prefill, vs_cpu.prefill, cpu_ref.prefill),
        ("decode", vs_ref.decode, vs_cpu.decode, cpu_ref.decode),
    ] {
        let ok = g.0 <= args.max_rel_err;
        if !ok {
            failures.push(format!("{name} {what} logits error {:.2e}", g.0));
        }
        rows.push(row(
            format!("{what} logits vs cpu f32 (argmax {}/{})", g.1, g.2),
            format!("{:.2e}", g.0),
            format!("<= {:.0e}", args.max_rel_err),
            if ok { "ok" } else { "FAIL" }.into(),
        ));
        rows.push(row(
            format!("{what} logits vs cpu q8 (argmax {}/{})", q.1, q.2),
            format!("{:.2e}", q.0),
            format!("cpu q8 vs f32 {:.2e}", c.0),
            "info".into(),
        ));
    }
    progress(&format!("{name}: logits compared"));

    // (2) Prefill throughput.
    let best = prefill_seconds(&mut gpu, args)?;
    let n_prefill = args.prefill_batch * args.prompt_tokens;
    rows.push(row(
        format!(
            "prefill tok/s ({}x{})",
            args.prefill_batch, args.prompt_tokens
        ),
        format!("{:.0}", n_prefill as f64 / best),
        String::new(),
        String::new(),
    ));

    // (2, 3) Decode throughput against the bandwidth floor.
    let wbytes = weight_bytes_per_step(&cfg);
    let kv_tok = (cfg.n_layers * 2 * cfg.kv_dim() * 4) as u64;
    for &b in batches {
        let tok_s = decode_rate(&mut gpu, args, b, per_seq)?;
        let avg_ctx = args.context as f64 + args.decode_steps as f64 / 2.0;
        let floor = decode_floor_tok_s(wbytes, kv_tok, b, avg_ctx, bw);
        rows.push(row(
            format!("decode tok/s batch {b} (ctx {})", args.context),
            format!("{tok_s:.0}"),
            format!("floor {floor:.0}"),
            format!("{:.0}% of floor", 100.0 * tok_s / floor),
        ));
        progress(&format!("{name}: decode batch {b}: {tok_s:.0} tok/s"));
    }
    Ok(())
}

/// Pages for the correctness check: two sequences of up to 6 pages each, interleaved.
const CHECK_PAGES: usize = 12;

/// Max relative error, argmax agreements and comparisons.
type Cmp = (f64, usize, usize);

/// Errors of one pair of engines, for prefill and for decode logits.
#[derive(Default)]
struct PairCmp {
    prefill: Cmp,
    decode: Cmp,
}

/// The logits of one step on every engine, in the order given.
fn step_all(
    engines: &mut [&mut Engine],
    items: &[StepItem<'_>],
) -> anyhow::Result<Vec<Vec<Vec<f32>>>> {
    engines.iter_mut().map(|e| Ok(e.step(items)?)).collect()
}

/// Runs the same steps on `[reference, cpu, gpu]` (the reference's argmax feeds all) and
/// compares logits: returns (gpu vs reference, gpu vs cpu, cpu vs reference).
fn compare(engines: &mut [&mut Engine; 3]) -> anyhow::Result<[PairCmp; 3]> {
    let vocab = engines[0].config().vocab_size;
    let pages_a: Vec<PageId> = [11, 0, 9, 2, 7, 4].map(PageId).to_vec();
    let pages_b: Vec<PageId> = [1, 10, 3, 8, 5, 6].map(PageId).to_vec();
    let mut out: [PairCmp; 3] = Default::default();
    // `decode[i]`: whether item i of the step is a decode token.
    let mut record = |l: &[Vec<Vec<f32>>], decode: [bool; 2]| {
        for (pair, (x, y)) in out.iter_mut().zip([(2, 0), (2, 1), (1, 0)]) {
            for (i, &is_decode) in decode.iter().enumerate() {
                let acc = if is_decode {
                    &mut pair.decode
                } else {
                    &mut pair.prefill
                };
                let (g, c) = (&l[x][i], &l[y][i]);
                acc.0 = acc.0.max(rel_err(g, c));
                acc.1 += usize::from(argmax(g) == argmax(c));
                acc.2 += 1;
            }
        }
    };
    let (a, b) = (tokens(37, 1, vocab), tokens(84, 2, vocab));
    // Two prompts prefilled together (ragged, causal).
    let step1 = [
        StepItem {
            tokens: &a,
            start_pos: 0,
            pages: &pages_a,
        },
        StepItem {
            tokens: &b[..64],
            start_pos: 0,
            pages: &pages_b,
        },
    ];
    let l = step_all(engines, &step1)?;
    record(&l, [false, false]);
    // A decodes while B's next chunk prefills over its cached pages.
    let mut next_a = TokenId(argmax(&l[0][0]) as u32);
    let step2 = [
        StepItem {
            tokens: std::slice::from_ref(&next_a),
            start_pos: 37,
            pages: &pages_a,
        },
        StepItem {
            tokens: &b[64..],
            start_pos: 64,
            pages: &pages_b,
        },
    ];
    let l = step_all(engines, &step2)?;
    record(&l, [true, false]);
    next_a = TokenId(argmax(&l[0][0]) as u32);
    let mut next_b = TokenId(argmax(&l[0][1]) as u32);
    for i in 0..4 {
        let step = [
            StepItem {
                tokens: std::slice::from_ref(&next_a),
                start_pos: 38 + i,
                pages: &pages_a,
            },
            StepItem {
                tokens: std::slice::from_ref(&next_b),
                start_pos: 84 + i,
                pages: &pages_b,
            },
        ];
        let l = step_all(engines, &step)?;
        record(&l, [true, true]);
        next_a = TokenId(argmax(&l[0][0]) as u32);
        next_b = TokenId(argmax(&l[0][1]) as u32);
    }
    Ok(out)
}

/// Best time of 3 (after a warm-up) to prefill `prefill_batch` prompts in one step.
fn prefill_seconds(gpu: &mut Engine, args: &GpuCheckArgs) -> anyhow::Result<f64> {
    let vocab = gpu.config().vocab_size;
    let bs = gpu.kv_layout().block_size.get();
    let prompts: Vec<Vec<TokenId>> = (0..args.prefill_batch)
        .map(|i| tokens(args.prompt_tokens, i as u32 * 7919, vocab))
        .collect();
    let pp = args.prompt_tokens.div_ceil(bs);
    let tables: Vec<Vec<PageId>> = (0..args.prefill_batch)
        .map(|i| (i * pp..(i + 1) * pp).map(|p| PageId(p as u32)).collect())
        .collect();
    let items: Vec<StepItem<'_>> = prompts
        .iter()
        .zip(&tables)
        .map(|(t, p)| StepItem {
            tokens: t,
            start_pos: 0,
            pages: p,
        })
        .collect();
    gpu.step(&items)?;
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        gpu.step(&items)?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(best)
}

/// Decode tokens/s at `batch` sequences of `args.context` prefilled tokens each.
fn decode_rate(
    gpu: &mut Engine,
    args: &GpuCheckArgs,
    batch: usize,
    per_seq: usize,
) -> anyhow::Result<f64> {
    let vocab = gpu.config().vocab_size;
    let tables: Vec<Vec<PageId>> = (0..batch)
        .map(|i| {
            (i * per_seq..(i + 1) * per_seq)
                .map(|p| PageId(p as u32))
                .collect()
        })
        .collect();
    let prompts: Vec<Vec<TokenId>> = (0..batch)
        .map(|i| tokens(args.context, i as u32 * 31, vocab))
        .collect();
    // Prefill 8 sequences per step to bound activation memory.
    for chunk in (0..batch).collect::<Vec<_>>().chunks(8) {
        let items: Vec<StepItem<'_>> = chunk
            .iter()
            .map(|&i| StepItem {
                tokens: &prompts[i],
                start_pos: 0,
                pages: &tables[i],
            })
            .collect();
        gpu.step(&items)?;
    }
    let next: Vec<TokenId> = (0..batch)
        .map(|i| TokenId((i * 13 % vocab) as u32))
        .collect();
    let run = |gpu: &mut Engine, pos: usize| {
        let items: Vec<StepItem<'_>> = (0..batch)
            .map(|i| StepItem {
                tokens: std::slice::from_ref(&next[i]),
                start_pos: pos,
                pages: &tables[i],
            })
            .collect();
        gpu.step(&items).map(|_| ())
    };
    // Two warm-up steps, then the timed ones (the logits copy back is included).
    run(gpu, args.context)?;
    run(gpu, args.context + 1)?;
    let t0 = Instant::now();
    for s in 0..args.decode_steps {
        run(gpu, args.context + 2 + s)?;
    }
    Ok((batch * args.decode_steps) as f64 / t0.elapsed().as_secs_f64())
}

fn table(rows: &[Row]) -> String {
    let head = ["model", "metric", "value", "reference", "verdict"];
    let cells: Vec<[&str; 5]> = rows
        .iter()
        .map(|r| [&*r.model, &*r.metric, &*r.value, &*r.reference, &*r.verdict])
        .collect();
    let mut w = head.map(str::len);
    for c in &cells {
        for (wi, s) in w.iter_mut().zip(c) {
            *wi = (*wi).max(s.len());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, c: [&str; 5]| {
        let _ = writeln!(
            out,
            "| {:<w0$} | {:<w1$} | {:>w2$} | {:<w3$} | {:<w4$} |",
            c[0],
            c[1],
            c[2],
            c[3],
            c[4],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2],
            w3 = w[3],
            w4 = w[4]
        );
    };
    line(&mut out, head);
    let sep = w.map(|n| "-".repeat(n));
    line(&mut out, [&sep[0], &sep[1], &sep[2], &sep[3], &sep[4]]);
    for c in cells {
        line(&mut out, c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct P {
        #[command(flatten)]
        a: GpuCheckArgs,
    }

    fn tiny(pages: usize) -> Engine {
        let opts = EngineOptions {
            kv_pages: pages,
            threads: 1,
            ..EngineOptions::default()
        };
        Engine::load(&ModelSource::Dummy("tiny".into()), &opts).unwrap()
    }

    /// The check's step sequences are valid engine steps (run here on CPU engines, where
    /// identical engines must agree exactly), and the table lines up.
    #[test]
    fn cuda_check_steps_run_on_any_backend() {
        let (mut a, mut b, mut c) = (tiny(CHECK_PAGES), tiny(CHECK_PAGES), tiny(CHECK_PAGES));
        let pairs = compare(&mut [&mut a, &mut b, &mut c]).unwrap();
        for p in &pairs {
            assert_eq!(p.prefill, (0.0, 3, 3));
            assert_eq!(p.decode, (0.0, 9, 9));
        }
        let args = P::parse_from([
            "x",
            "--prompt-tokens",
            "40",
            "--prefill-batch",
            "2",
            "--context",
            "20",
            "--decode-steps",
            "2",
        ])
        .a;
        let per_seq = (args.context + args.decode_steps + 4).div_ceil(16);
        let mut e = tiny(3 * per_seq);
        assert!(prefill_seconds(&mut e, &args).unwrap() > 0.0);
        assert!(decode_rate(&mut e, &args, 3, per_seq).unwrap() > 0.0);
        let t = table(&[Row {
            model: "m".into(),
            metric: "decode tok/s".into(),
            value: "12".into(),
            reference: "floor 100".into(),
            verdict: "12% of floor".into(),
        }]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines.iter().all(|l| l.len() == lines[0].len()), "{t}");
        assert!(lines[2].contains("| decode tok/s |"), "{t}");
    }
}
