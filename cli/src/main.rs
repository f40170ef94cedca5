//! `lightsout`: the command line. Thin: parsing arguments and printing; the work is in
//! `lightsout-core` and `lightsout-worker`.

mod compare;
mod crdgen;
mod output;
mod report;
mod results_uri;
mod run;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "lightsout", version, about = "Evaluate code-review agents: can this repository go lights-off?")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run an EvaluationRun on this machine (no cluster). Interrupt and run again to resume.
    Run {
        /// The run file (the same YAML you would `kubectl apply`).
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// Where results go, overriding spec.storage.results (file://DIR).
        #[arg(long)]
        results: Option<String>,
        /// A pricing table (YAML) instead of the built-in one.
        #[arg(long)]
        pricing: Option<PathBuf>,
        /// How long a provider may send nothing (no byte of its answer, headers included) before
        /// a model call is taken for a hang and retried: the single-shot harness's calls and the
        /// agentic harnesses' (through the metering proxy) alike. e.g. 90s, 5m.
        #[arg(long, default_value = "5m", value_parser = lightsout_api::duration::parse)]
        provider_stall_timeout: std::time::Duration,
    },
    /// Write a run's HTML report (report.html next to its summary.json) and print a compact table.
    /// With --baseline, also what changed since a baseline run and what it cost.
    Report(report::ReportArgs),
    /// Compare a candidate run with a baseline run, paired by task: recall@k and composite deltas
    /// with paired bootstrap intervals, McNemar's exact test, cost and latency deltas, and a
    /// verdict. Exit code 0 NoSignificantChange or Improved, 1 Regressed, 2 error.
    Compare(compare::CompareArgs),
    /// Check a run file and its dataset, and show what it would run.
    Validate {
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
    /// Serve the built-in scripted model server (OpenAI- and Anthropic-compatible) until
    /// interrupted (Ctrl-C or SIGTERM): deterministic canned answers for trying harnesses offline.
    ScriptedServer {
        /// Only this API key is accepted; any non-empty key when absent.
        #[arg(long)]
        api_key: Option<String>,
        /// The address to listen on, e.g. 0.0.0.0:8080 to serve other hosts or pods; port 0 picks
        /// a free port.
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
        listen: std::net::SocketAddr,
    },
    /// The agent sandbox's entry point (used by `lightsout run` itself; not for direct use).
    #[command(name = "__sandbox", hide = true)]
    Sandbox {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Write the CustomResourceDefinition YAML generated from the API types.
    Crdgen {
        /// Output file; standard output when absent.
        #[arg(short = 'o', long = "out")]
        out: Option<PathBuf>,
        /// Fail when the file differs from what the types generate, instead of writing it.
        #[arg(long, requires = "out")]
        check: bool,
        /// Which resource: EvaluationRun (`run`) or EvaluationSchedule (`schedule`).
        #[arg(long, value_enum, default_value = "run")]
        kind: crdgen::CrdArg,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Compare(args) => return compare::main(args),
        Command::Run { file, results, pricing, provider_stall_timeout } => {
            match run::run(&file, results, pricing.as_deref(), provider_stall_timeout) {
                Ok(finished) => return finished.exit_code(),
                Err(e) => Err(e),
            }
        }
        Command::Validate { file } => run::validate(&file),
        Command::Report(args) => report::report(&args),
        Command::Crdgen { out, check, kind } => crdgen::crdgen(kind, out.as_deref(), check),
        Command::ScriptedServer { api_key, listen } => run::scripted_server(api_key, listen),
        Command::Sandbox { args } => match lightsout_worker::sandbox::main(&args) {
            Ok(code) => std::process::exit(code),
            Err(e) => Err(anyhow::anyhow!("sandbox: {e}")),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_provider_stall_timeout_defaults_to_the_workers_and_is_settable() {
        let stall = |args: &[&str]| match Cli::try_parse_from(args).unwrap().command {
            Command::Run { provider_stall_timeout, .. } => provider_stall_timeout,
            _ => unreachable!("a run command"),
        };
        assert_eq!(stall(&["lightsout", "run", "-f", "run.yaml"]), lightsout_model::DEFAULT_STALL_TIMEOUT);
        let set = stall(&["lightsout", "run", "-f", "run.yaml", "--provider-stall-timeout", "45s"]);
        assert_eq!(set, std::time::Duration::from_secs(45));
    }
}
