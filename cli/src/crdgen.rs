//! `lightsout crdgen`: prints, writes or checks the CRD YAML that `lightsout_api::crd` generates.

use std::path::Path;

use anyhow::{bail, Context};
use lightsout_api::crd::{crd_yaml, CrdKind};

/// Which CRD to generate, as `lightsout crdgen --kind` spells it.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum CrdArg {
    Run,
    Schedule,
}

impl From<CrdArg> for CrdKind {
    fn from(arg: CrdArg) -> CrdKind {
        match arg {
            CrdArg::Run => CrdKind::Run,
            CrdArg::Schedule => CrdKind::Schedule,
        }
    }
}

pub fn crdgen(kind: CrdArg, out: Option<&Path>, check: bool) -> anyhow::Result<()> {
    let yaml = crd_yaml(kind.into())?;
    match (out, check) {
        (None, _) => crate::output::print(yaml)?,
        (Some(path), false) => std::fs::write(path, yaml).with_context(|| format!("writing {}", path.display()))?,
        (Some(path), true) => {
            let committed = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            if committed != yaml {
                bail!(
                    "{} differs from what the API types generate: run `lightsout crdgen -o {}` and commit it",
                    path.display(),
                    path.display()
                );
            }
        }
    }
    Ok(())
}
