//! The command line, parsed; no work happens here.

use clap::{Parser, Subcommand, ValueEnum};

/// Snowflake-style 64-bit IDs: generate them and take them apart.
#[derive(Debug, Parser)]
#[command(name = "monoflake", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print new IDs, one per line.
    Gen(GenArgs),
    /// Print the parts of IDs (decimal, or hex with a 0x prefix).
    Decode(DecodeArgs),
    /// List the layout presets with their widths, epoch, tick and lifetime.
    Layouts,
}

#[derive(Debug, clap::Args)]
pub struct GenArgs {
    /// How many IDs to print in total.
    #[arg(short = 'n', long = "count", default_value_t = 1)]
    pub count: u64,
    /// The layout preset.
    #[arg(long, default_value = "twitter")]
    pub layout: String,
    /// The node value all IDs carry (all node fields together).
    #[arg(long, default_value_t = 0)]
    pub node: u64,
    /// Threads sharing one generator; COUNT is the total over all of them.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
    /// How IDs are printed.
    #[arg(long, value_enum, default_value_t = Format::Decimal)]
    pub format: Format,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Decimal, e.g. 175928847299117063.
    Decimal,
    /// Sixteen hex digits with a 0x prefix, e.g. 0x0271078d9c400007.
    Hex,
}

#[derive(Debug, clap::Args)]
pub struct DecodeArgs {
    /// The layout preset the IDs were made under.
    #[arg(long, default_value = "twitter")]
    pub layout: String,
    /// One JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
    /// The IDs.
    #[arg(required = true)]
    pub ids: Vec<String>,
}
