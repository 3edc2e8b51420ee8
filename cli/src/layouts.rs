//! `monoflake layouts`: the presets with their widths, epoch, tick and lifetime, or one
//! layout printed as a spec.

use std::io::{self, Write};

use monoflake::{Layout, PRESETS, rfc3339};

use crate::args::LayoutsArgs;
use crate::failure::Failure;

pub fn run(args: &LayoutsArgs) -> Result<(), Failure> {
    let mut out = io::BufWriter::new(io::stdout().lock());
    if let Some(layout) = &args.spec {
        writeln!(out, "{layout}")?;
        return Ok(out.flush()?);
    }
    writeln!(
        out,
        "{:<12} {:>4} {:<22} {:>3} {:<6} {:>6}  {:<24}  {:<10} {:>9} {:>10} {:>7}",
        "layout",
        "time",
        "node fields",
        "seq",
        "node",
        "tick",
        "epoch",
        "runs out",
        "nodes",
        "IDs/s/node",
        "JS-safe"
    )?;
    let listed = match args.layouts.as_slice() {
        [] => PRESETS
            .iter()
            .map(|name| Layout::preset(name))
            .collect::<Result<Vec<_>, _>>()?,
        given => given.to_vec(),
    };
    for l in &listed {
        let fields: Vec<String> = l
            .node_fields()
            .iter()
            .map(|f| format!("{}:{}", f.name(), f.bits()))
            .collect();
        let per_second = (u128::from(l.max_sequence()) + 1) * 1000 / u128::from(l.tick_ms());
        writeln!(
            out,
            "{:<12} {:>4} {:<22} {:>3} {:<6} {:>4}ms  {:<24}  {:<10} {:>9} {:>10} {:>7}",
            l.name(),
            l.time_bits(),
            fields.join(","),
            l.sequence_bits(),
            if l.node_below_sequence() {
                "low"
            } else {
                "middle"
            },
            l.tick_ms(),
            rfc3339(l.epoch_ms()),
            &rfc3339(l.expires_at_ms())[..10],
            l.max_node() + 1,
            per_second,
            if l.total_bits() <= 53 { "yes" } else { "no" }
        )?;
    }
    out.flush()?;
    Ok(())
}
