//! A pod's status as the kubelet reports it: phase, conditions, container states, written
//! whole through the pod's `status` subresource after every change.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Value};

fn ts(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// One container's state.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    Waiting {
        reason: String,
        message: Option<String>,
    },
    Running {
        started_at: DateTime<Utc>,
    },
    Terminated {
        exit_code: i32,
        reason: String,
        message: Option<String>,
        started_at: DateTime<Utc>,
        finished_at: DateTime<Utc>,
    },
}

impl State {
    pub fn waiting(reason: &str, message: Option<String>) -> State {
        State::Waiting { reason: reason.into(), message }
    }

    fn to_json(&self) -> Value {
        match self {
            State::Waiting { reason, message } => json!({"waiting": {"reason": reason, "message": message}}),
            State::Running { started_at } => json!({"running": {"startedAt": ts(*started_at)}}),
            State::Terminated { exit_code, reason, message, started_at, finished_at } => json!({"terminated": {
                "exitCode": exit_code, "reason": reason, "message": message,
                "startedAt": ts(*started_at), "finishedAt": ts(*finished_at),
            }}),
        }
    }

    pub fn is_terminated(&self) -> bool {
        matches!(self, State::Terminated { .. })
    }
}

#[derive(Debug, Clone)]
pub struct ContainerStatus {
    pub name: String,
    pub image: String,
    pub restart_count: i32,
    pub state: State,
    pub last_state: Option<State>,
    pub container_id: Option<String>,
}

impl ContainerStatus {
    pub fn new(name: &str, image: &str) -> ContainerStatus {
        ContainerStatus {
            name: name.into(),
            image: image.into(),
            restart_count: 0,
            state: State::waiting("PodInitializing", None),
            last_state: None,
            container_id: None,
        }
    }

    fn to_json(&self) -> Value {
        let running = matches!(self.state, State::Running { .. });
        let mut value = json!({
            "name": self.name,
            "image": self.image,
            "imageID": format!("testkit://{}", self.image),
            "ready": running,
            "started": running,
            "restartCount": self.restart_count,
            "state": self.state.to_json(),
            "lastState": self.last_state.as_ref().map(State::to_json).unwrap_or_else(|| json!({})),
        });
        if let Some(id) = &self.container_id {
            value["containerID"] = json!(id);
        }
        value
    }
}

/// A pod condition's status, reason, message and last transition.
type Condition = (bool, Option<String>, Option<String>, DateTime<Utc>);

/// Everything the kubelet reports of one pod.
#[derive(Debug, Clone)]
pub struct PodState {
    pub phase: &'static str,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub pod_ip: String,
    pub start_time: DateTime<Utc>,
    pub init: Vec<ContainerStatus>,
    pub main: Vec<ContainerStatus>,
    /// Conditions by type: (status, reason, message, last transition).
    conditions: BTreeMap<String, Condition>,
}

impl PodState {
    pub fn new(pod_ip: String, init: Vec<ContainerStatus>, main: Vec<ContainerStatus>, now: DateTime<Utc>) -> PodState {
        let mut state = PodState {
            phase: "Pending",
            reason: None,
            message: None,
            pod_ip,
            start_time: now,
            init,
            main,
            conditions: BTreeMap::new(),
        };
        state.set_condition("PodScheduled", true, None, None, now);
        state
    }

    /// Sets a condition, keeping its transition time when its status is unchanged.
    pub fn set_condition(
        &mut self,
        type_: &str,
        status: bool,
        reason: Option<&str>,
        message: Option<&str>,
        now: DateTime<Utc>,
    ) {
        let since = match self.conditions.get(type_) {
            Some((old, _, _, at)) if *old == status => *at,
            _ => now,
        };
        self.conditions.insert(type_.into(), (status, reason.map(String::from), message.map(String::from), since));
    }

    /// Recomputes Initialized, ContainersReady and Ready from the container states.
    pub fn refresh_conditions(&mut self, now: DateTime<Utc>) {
        let initialized = self.init.iter().all(|c| matches!(&c.state, State::Terminated { exit_code: 0, .. }));
        let ready = !self.main.is_empty() && self.main.iter().all(|c| matches!(c.state, State::Running { .. }));
        let terminal = matches!(self.phase, "Succeeded" | "Failed");
        let initialized = initialized || terminal;
        self.set_condition("Initialized", initialized, (!initialized).then_some("ContainersNotInitialized"), None, now);
        let reason = match (ready, terminal) {
            (true, _) => None,
            (false, true) => Some("PodCompleted"),
            (false, false) => Some("ContainersNotReady"),
        };
        self.set_condition("ContainersReady", ready, reason, None, now);
        self.set_condition("Ready", ready, reason, None, now);
    }

    pub fn container_mut(&mut self, init: bool, name: &str) -> &mut ContainerStatus {
        let list = if init { &mut self.init } else { &mut self.main };
        list.iter_mut().find(|c| c.name == name).expect("a container of the pod")
    }

    /// The `status` object to write.
    pub fn to_json(&self) -> Value {
        let conditions: Vec<Value> = self
            .conditions
            .iter()
            .map(|(type_, (status, reason, message, at))| {
                json!({"type": type_, "status": if *status { "True" } else { "False" }, "reason": reason,
                       "message": message, "lastProbeTime": null, "lastTransitionTime": ts(*at)})
            })
            .collect();
        json!({
            "phase": self.phase,
            "reason": self.reason,
            "message": self.message,
            "hostIP": "127.0.0.1",
            "podIP": self.pod_ip,
            "podIPs": [{"ip": self.pod_ip}],
            "startTime": ts(self.start_time),
            "conditions": conditions,
            "initContainerStatuses": self.init.iter().map(ContainerStatus::to_json).collect::<Vec<_>>(),
            "containerStatuses": self.main.iter().map(ContainerStatus::to_json).collect::<Vec<_>>(),
        })
    }
}
