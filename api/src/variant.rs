//! The variants of a run: one per combination of its matrix axes (model × reasoning effort ×
//! harness × prompt), each with a stable id. Validation names them and the plan crosses them with
//! tasks and repeats.

use serde::{Deserialize, Serialize};

use crate::hash::short_hash_fields;
use crate::{ContextConfig, EvaluationRunSpec, HarnessRef, ModelRef, PromptRef, ReasoningEffort};

/// One combination of the matrix axes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Variant {
    /// Stable hash of the combination; the directory name of its results.
    pub id: String,
    /// Readable: `model[/effort]/harness@version/prompt`.
    pub name: String,
    pub model: ModelRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    pub harness: HarnessRef,
    pub prompt: PromptRef,
}

impl Variant {
    fn new(model: ModelRef, reasoning_effort: Option<ReasoningEffort>, harness: HarnessRef, prompt: PromptRef) -> Self {
        let effort = reasoning_effort.map(|e| e.as_str()).unwrap_or("");
        let prompt_key = match (&prompt.preset, &prompt.inline) {
            (Some(preset), _) => format!("preset:{}", preset.as_str()),
            (None, Some(text)) => format!("inline:{text}"),
            (None, None) => "preset:default".to_string(),
        };
        let id = short_hash_fields(&[
            &model.provider,
            &model.name,
            effort,
            harness.name.as_str(),
            &harness.version,
            &prompt_key,
        ]);
        let mut name = model.name.clone();
        if let Some(effort) = reasoning_effort {
            name.push('/');
            name.push_str(effort.as_str());
        }
        name.push_str(&format!("/{}@{}/{}", harness.name.as_str(), harness.version, prompt.label()));
        Variant { id, name, model, reasoning_effort, harness, prompt }
    }
}

/// The variants of a spec, in the order of its axes (models outermost).
pub fn variants(spec: &EvaluationRunSpec) -> Vec<Variant> {
    let efforts: Vec<Option<ReasoningEffort>> = match &spec.matrix.reasoning_efforts {
        Some(list) => list.iter().copied().map(Some).collect(),
        None => vec![None],
    };
    let harnesses: Vec<HarnessRef> = match (&spec.matrix.harnesses, &spec.agent.harness) {
        (Some(list), _) => list.clone(),
        (None, Some(harness)) => vec![harness.clone()],
        (None, None) => Vec::new(),
    };
    let prompts: Vec<PromptRef> = spec.matrix.prompts.clone().unwrap_or_else(|| vec![spec.agent.prompt.clone()]);
    let mut out = Vec::new();
    for model in &spec.matrix.models {
        for effort in &efforts {
            for harness in &harnesses {
                for prompt in &prompts {
                    out.push(Variant::new(model.clone(), *effort, harness.clone(), prompt.clone()));
                }
            }
        }
    }
    // Listing a value twice on an axis must not run it twice.
    let mut seen = std::collections::HashSet::new();
    out.retain(|v| seen.insert(v.id.clone()));
    out
}

/// The configurations of `matrix.contextConfigs` in the order listed, each once; `[None]`
/// without the axis.
pub fn context_axis(spec: &EvaluationRunSpec) -> Vec<Option<ContextConfig>> {
    match &spec.matrix.context_configs {
        Some(list) if !list.is_empty() => {
            let mut seen = std::collections::HashSet::new();
            list.iter().copied().filter(|c| seen.insert(*c)).map(Some).collect()
        }
        _ => vec![None],
    }
}
