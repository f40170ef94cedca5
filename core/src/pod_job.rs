//! One trial attempt as the controller hands it to a worker pod (`lightsout-worker run --job FILE`);
//! in core so that the controller writes exactly the schema the worker reads.
//!
//! The job carries no ground truth and no key: the provider's key is read from the environment
//! variable it names (the worker's own, from a Secret), and only the metering proxy uses it.

use std::path::PathBuf;
use std::time::Duration;

use crate::dataset::Task;
use lightsout_api::variant::Variant;
use lightsout_api::{ApiKind, S3Connection};
use lightsout_model::Endpoint;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodJob {
    pub run: String,
    pub variant: Variant,
    pub task: Task,
    pub trial_id: String,
    /// The trial's configuration of the `matrix.contextConfigs` axis, part of its identity;
    /// absent without the axis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_config: Option<lightsout_api::ContextConfig>,
    pub repeat: u32,
    pub attempt: u32,
    /// The full prompt, rendered by the controller.
    pub prompt: String,
    pub provider: ProviderEndpoint,
    pub timeout_seconds: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default, rename = "maxUSD", skip_serializing_if = "Option::is_none")]
    pub max_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// The most bytes of one file the agent leaves that is read (`spec.agent.maxFileBytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_file_bytes: Option<u64>,
    /// The size of the trial's scratch space in MiB (`spec.agent.scratchMiB`).
    #[serde(default, rename = "scratchMiB", skip_serializing_if = "Option::is_none")]
    pub scratch_mib: Option<u64>,
    /// `s3://bucket/prefix` (or `file://DIR`).
    pub results: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3Connection>,
    /// The task repository's base tree, for agentic harnesses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_tree: Option<PathBuf>,
    /// Where harnesses were installed (by the init container).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness_root: Option<PathBuf>,
    /// Where the trial's summary is written for the controller.
    #[serde(default = "default_termination_log")]
    pub termination_log: PathBuf,
    /// How long storing the results may keep failing before the attempt ends as an
    /// infrastructure failure.
    #[serde(default = "default_upload_deadline")]
    pub upload_deadline_seconds: u64,
    /// How long the provider may send nothing (no byte of its answer, headers included) before
    /// a model call is taken for a hang and fails, by the single-shot harness's client and by the
    /// metering proxy alike; [`lightsout_model::DEFAULT_STALL_TIMEOUT`] when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_stall_timeout_seconds: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderEndpoint {
    pub name: String,
    pub base_url: String,
    pub api_kind: ApiKind,
    /// The environment variable that holds the key.
    pub api_key_env: String,
}

fn default_termination_log() -> PathBuf {
    PathBuf::from("/dev/termination-log")
}

fn default_upload_deadline() -> u64 {
    600
}

impl PodJob {
    /// Parses a job file; errors name the field.
    pub fn parse(text: &str) -> Result<PodJob, String> {
        let mut json = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(&mut json).map_err(|e| format!("field {}: {}", e.path(), e.inner()))
    }

    pub fn endpoint(&self, api_key: String) -> Endpoint {
        Endpoint {
            provider: self.provider.name.clone(),
            base_url: self.provider.base_url.clone(),
            api_kind: self.provider.api_kind,
            api_key: Some(api_key),
        }
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_seconds.max(1))
    }

    pub fn provider_stall_timeout(&self) -> Duration {
        self.provider_stall_timeout_seconds
            .map_or(lightsout_model::DEFAULT_STALL_TIMEOUT, |seconds| Duration::from_secs(seconds.max(1)))
    }
}
