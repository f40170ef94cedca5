//! The per-run NetworkPolicy that confines trial pods.
//!
//! One NetworkPolicy per EvaluationRun, named `<run>-trials`, owned by the run, selects the run's
//! trial pods by [`labels::run_selector`] and declares both policy types:
//!
//! - **Ingress:** no rule, so nothing may connect to a trial pod.
//! - **Egress:** only
//!   1. DNS — UDP and TCP 53 to the cluster DNS pods (`k8s-app: kube-dns` in the namespace
//!      `kube-system`, selected by the `kubernetes.io/metadata.name` label every namespace has
//!      since Kubernetes 1.22);
//!   2. the endpoint of every provider that `spec.matrix.models` uses (judges do not run in
//!      trial pods, so judge-only providers are not reachable from them);
//!   3. the S3 endpoint of `spec.storage.s3` (AWS S3 when it names none).
//!
//! A NetworkPolicy cannot select by DNS name, only by pod/namespace labels or by IP block, so an
//! endpoint URL becomes [`EgressTarget`]s by [`targets_from_url`]:
//!
//! - an IP literal host (`http://10.0.0.7:8000/v1`, `http://[fd00::7]/v1`) → that address as a
//!   `/32` or `/128` IP block. (A Service's ClusterIP does not work here: most network plugins
//!   apply policies after the ClusterIP is translated to pod IPs; name the Service instead.)
//! - an in-cluster Service name (`<svc>.<ns>.svc` or `<svc>.<ns>.svc.cluster.local`) → the
//!   Service's pods, by namespace and the pod selector that the controller's configuration gives
//!   for `<ns>/<svc>` ([`NetworkSettings::services`]). Policies match the pods' ports, not the
//!   Service's, so the configuration may give the target port; the URL's port is used when it
//!   does not.
//! - any other host name (e.g. `api.openai.com`) → the CIDRs the controller's configuration lists
//!   for that provider ([`NetworkSettings::provider_cidrs`], [`NetworkSettings::s3_cidrs`]) on the
//!   URL's port; without them it is an error naming the provider, because the only alternative
//!   would be allowing all egress.
//!
//! Every endpoint port is TCP; URLs without a port use 443 (`https`) or 80 (`http`).

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use lightsout_api::EvaluationRun;

use crate::job::{owner_reference, JobError};
use crate::labels;

/// One place trial pods may open TCP connections to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum EgressTarget {
    /// The pods behind an in-cluster Service.
    Service { namespace: String, pod_selector: BTreeMap<String, String>, port: u16 },
    /// An address range.
    IpBlock { cidr: String, port: u16 },
}

/// How the controller's configuration describes an in-cluster Service's pods.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceBackend {
    /// The Service's pod selector.
    pub pod_selector: BTreeMap<String, String>,
    /// The pods' port, when it differs from the Service port in the URL.
    pub target_port: Option<u16>,
}

/// The controller's network configuration.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct NetworkSettings {
    /// In-cluster Services by `<namespace>/<name>`.
    pub services: BTreeMap<String, ServiceBackend>,
    /// CIDRs of public endpoints, by provider name (a key of `spec.providers`).
    pub provider_cidrs: BTreeMap<String, Vec<String>>,
    /// CIDRs of the S3 endpoint when its host is a public name.
    pub s3_cidrs: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkError {
    /// The URL does not parse as `http(s)://host[:port][/path]`.
    BadUrl {
        endpoint: String,
        url: String,
        reason: String,
    },
    /// A public host name with no CIDRs configured.
    PublicHostWithoutCidrs {
        endpoint: String,
        host: String,
    },
    /// An in-cluster Service the configuration has no pod selector for.
    UnknownService {
        endpoint: String,
        service: String,
    },
    /// A configured CIDR that does not parse.
    BadCidr {
        endpoint: String,
        cidr: String,
    },
    /// A model names a provider the spec does not declare.
    UnknownProvider {
        provider: String,
    },
    Owner(JobError),
}

impl fmt::Display for NetworkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetworkError::BadUrl { endpoint, url, reason } => write!(f, "{endpoint}: endpoint URL {url:?}: {reason}"),
            NetworkError::PublicHostWithoutCidrs { endpoint, host } => write!(
                f,
                "{endpoint}: the endpoint host {host:?} is a DNS name, and a NetworkPolicy cannot allow egress by \
                 name: configure the CIDRs this endpoint resolves to, or use an IP address or an in-cluster \
                 Service (<svc>.<ns>.svc)"
            ),
            NetworkError::UnknownService { endpoint, service } => write!(
                f,
                "{endpoint}: the in-cluster Service {service} has no pod selector in the controller's network \
                 configuration: add one for {service}"
            ),
            NetworkError::BadCidr { endpoint, cidr } => {
                write!(f, "{endpoint}: {cidr:?} is not a CIDR such as 203.0.113.0/24")
            }
            NetworkError::UnknownProvider { provider } => {
                write!(f, "provider {provider:?} is used by spec.matrix.models but not declared in spec.providers")
            }
            NetworkError::Owner(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for NetworkError {}

/// The host and port of `http(s)://host[:port][/…]`; IPv6 hosts without their brackets.
fn host_and_port(endpoint: &str, url: &str) -> Result<(String, u16), NetworkError> {
    let bad = |reason: &str| NetworkError::BadUrl { endpoint: endpoint.into(), url: url.into(), reason: reason.into() };
    let (rest, default_port) = if let Some(rest) = url.strip_prefix("https://") {
        (rest, 443)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (rest, 80)
    } else {
        return Err(bad("must start with http:// or https://"));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Err(bad("user information in the URL is not supported"));
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or_else(|| bad("unclosed [ in the host"))?;
        match after {
            "" => (host, None),
            _ => (host, Some(after.strip_prefix(':').ok_or_else(|| bad("unexpected text after ]"))?)),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(bad("no host"));
    }
    let port = match port {
        Some(p) => p.parse::<u16>().ok().filter(|p| *p != 0).ok_or_else(|| bad("bad port"))?,
        None => default_port,
    };
    Ok((host.to_ascii_lowercase(), port))
}

fn check_cidr(endpoint: &str, cidr: &str) -> Result<(), NetworkError> {
    let bad = || NetworkError::BadCidr { endpoint: endpoint.into(), cidr: cidr.into() };
    let (ip, prefix) = cidr.split_once('/').ok_or_else(bad)?;
    let ip: IpAddr = ip.parse().map_err(|_| bad())?;
    let prefix: u8 = prefix.parse().map_err(|_| bad())?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    if prefix > max {
        return Err(bad());
    }
    Ok(())
}

/// The namespace, Service name and port of an in-cluster Service URL
/// (`http(s)://<svc>.<ns>.svc[.cluster.local][:port]/…`); `None` for any other URL.
pub fn in_cluster_service(url: &str) -> Option<(String, String, u16)> {
    let (host, port) = host_and_port("", url).ok()?;
    let host = host.trim_end_matches('.');
    let name = host.strip_suffix(".svc.cluster.local").or_else(|| host.strip_suffix(".svc"))?;
    let (service, namespace) =
        name.split_once('.').filter(|(s, n)| !s.is_empty() && !n.is_empty() && !n.contains('.'))?;
    Some((namespace.to_string(), service.to_string(), port))
}

/// The targets that let trial pods reach `url`. `endpoint` names it in errors (`provider
/// "openai"`); `cidrs` are the configured CIDRs for it when its host is a public name.
pub fn targets_from_url(
    endpoint: &str,
    url: &str,
    services: &BTreeMap<String, ServiceBackend>,
    cidrs: &[String],
) -> Result<Vec<EgressTarget>, NetworkError> {
    let (host, port) = host_and_port(endpoint, url)?;
    if let Ok(ip) = host.parse::<IpAddr>() {
        let cidr = match ip {
            IpAddr::V4(_) => format!("{ip}/32"),
            IpAddr::V6(_) => format!("{ip}/128"),
        };
        return Ok(vec![EgressTarget::IpBlock { cidr, port }]);
    }
    let host = host.trim_end_matches('.');
    let in_cluster = host.strip_suffix(".svc.cluster.local").or_else(|| host.strip_suffix(".svc"));
    if let Some(name) = in_cluster {
        if let Some((service, namespace)) = name.split_once('.').filter(|(s, n)| !s.is_empty() && !n.contains('.')) {
            let key = format!("{namespace}/{service}");
            let backend = services
                .get(&key)
                .ok_or_else(|| NetworkError::UnknownService { endpoint: endpoint.into(), service: key.clone() })?;
            return Ok(vec![EgressTarget::Service {
                namespace: namespace.to_string(),
                pod_selector: backend.pod_selector.clone(),
                port: backend.target_port.unwrap_or(port),
            }]);
        }
    }
    if cidrs.is_empty() {
        return Err(NetworkError::PublicHostWithoutCidrs { endpoint: endpoint.into(), host: host.into() });
    }
    cidrs
        .iter()
        .map(|cidr| {
            check_cidr(endpoint, cidr)?;
            Ok(EgressTarget::IpBlock { cidr: cidr.clone(), port })
        })
        .collect()
}

/// The egress targets of a run's trial pods: the providers of `spec.matrix.models` and the
/// results store's S3 endpoint (none for a `file://` results store), sorted and deduplicated.
pub fn run_egress_targets(run: &EvaluationRun, settings: &NetworkSettings) -> Result<Vec<EgressTarget>, NetworkError> {
    let spec = &run.spec;
    let mut targets = Vec::new();
    let providers: std::collections::BTreeSet<&str> = spec.matrix.models.iter().map(|m| m.provider.as_str()).collect();
    for name in providers {
        let provider =
            spec.providers.get(name).ok_or_else(|| NetworkError::UnknownProvider { provider: name.to_string() })?;
        let cidrs = settings.provider_cidrs.get(name).map(Vec::as_slice).unwrap_or(&[]);
        targets.extend(targets_from_url(&format!("provider {name:?}"), &provider.base_url, &settings.services, cidrs)?);
    }
    if spec.storage.results.starts_with("s3://") {
        let s3 = spec.storage.s3.as_ref();
        let url = match s3.and_then(|s| s.endpoint.clone()) {
            Some(endpoint) => endpoint,
            None => match s3.and_then(|s| s.region.clone()) {
                Some(region) => format!("https://s3.{region}.amazonaws.com"),
                None => "https://s3.amazonaws.com".to_string(),
            },
        };
        targets.extend(targets_from_url(
            "the S3 endpoint (spec.storage.s3)",
            &url,
            &settings.services,
            &settings.s3_cidrs,
        )?);
    }
    targets.sort();
    targets.dedup();
    Ok(targets)
}

/// The NetworkPolicy's name for `run`: `<run>-trials`.
pub fn network_policy_name(run: &str) -> String {
    let name = format!("{run}-trials");
    if name.len() <= 253 {
        name
    } else {
        format!(
            "{}-{}-trials",
            &run[..200].trim_end_matches(['-', '.']),
            &lightsout_api::hash::short_hash(run.as_bytes())
        )
    }
}

fn tcp(port: u16) -> NetworkPolicyPort {
    NetworkPolicyPort { port: Some(IntOrString::Int(port as i32)), protocol: Some("TCP".into()), end_port: None }
}

fn namespace_selector(namespace: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some(BTreeMap::from([("kubernetes.io/metadata.name".to_string(), namespace.to_string())])),
        match_expressions: None,
    }
}

/// The DNS egress rule: UDP and TCP 53 to the cluster DNS pods.
fn dns_rule() -> NetworkPolicyEgressRule {
    NetworkPolicyEgressRule {
        to: Some(vec![NetworkPolicyPeer {
            namespace_selector: Some(namespace_selector("kube-system")),
            pod_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([("k8s-app".to_string(), "kube-dns".to_string())])),
                match_expressions: None,
            }),
            ip_block: None,
        }]),
        ports: Some(vec![
            NetworkPolicyPort { port: Some(IntOrString::Int(53)), protocol: Some("UDP".into()), end_port: None },
            tcp(53),
        ]),
    }
}

fn target_rule(target: &EgressTarget) -> NetworkPolicyEgressRule {
    match target {
        EgressTarget::Service { namespace, pod_selector, port } => NetworkPolicyEgressRule {
            to: Some(vec![NetworkPolicyPeer {
                namespace_selector: Some(namespace_selector(namespace)),
                pod_selector: Some(LabelSelector { match_labels: Some(pod_selector.clone()), match_expressions: None }),
                ip_block: None,
            }]),
            ports: Some(vec![tcp(*port)]),
        },
        EgressTarget::IpBlock { cidr, port } => NetworkPolicyEgressRule {
            to: Some(vec![NetworkPolicyPeer {
                ip_block: Some(IPBlock { cidr: cidr.clone(), except: None }),
                namespace_selector: None,
                pod_selector: None,
            }]),
            ports: Some(vec![tcp(*port)]),
        },
    }
}

/// The run's NetworkPolicy: its trial pods accept no connection and reach only DNS and `targets`.
pub fn network_policy(run: &EvaluationRun, targets: &[EgressTarget]) -> Result<NetworkPolicy, NetworkError> {
    let owner = owner_reference(run).map_err(NetworkError::Owner)?;
    let name = run.metadata.name.clone().unwrap_or_default();
    let mut egress = vec![dns_rule()];
    egress.extend(targets.iter().map(target_rule));
    Ok(NetworkPolicy {
        metadata: ObjectMeta {
            name: Some(network_policy_name(&name)),
            namespace: run.metadata.namespace.clone(),
            labels: Some(BTreeMap::from([
                (labels::RUN.to_string(), labels::label_value(&name)),
                (labels::MANAGED_BY.to_string(), labels::MANAGER.to_string()),
            ])),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(labels::run_selector(&name)),
            policy_types: Some(vec!["Ingress".into(), "Egress".into()]),
            ingress: Some(Vec::new()),
            egress: Some(egress),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::tests::test_run;
    use serde_yaml::Value;

    fn services() -> BTreeMap<String, ServiceBackend> {
        BTreeMap::from([(
            "models/vllm".to_string(),
            ServiceBackend {
                pod_selector: BTreeMap::from([("app".to_string(), "vllm".to_string())]),
                target_port: Some(8000),
            },
        )])
    }

    #[test]
    fn ip_literals_become_single_address_blocks() {
        assert_eq!(
            targets_from_url("p", "http://10.0.0.7:8080/v1", &services(), &[]).unwrap(),
            vec![EgressTarget::IpBlock { cidr: "10.0.0.7/32".into(), port: 8080 }]
        );
        assert_eq!(
            targets_from_url("p", "https://[fd00::7]/v1", &services(), &[]).unwrap(),
            vec![EgressTarget::IpBlock { cidr: "fd00::7/128".into(), port: 443 }]
        );
        assert_eq!(
            targets_from_url("p", "http://192.168.1.1", &services(), &[]).unwrap(),
            vec![EgressTarget::IpBlock { cidr: "192.168.1.1/32".into(), port: 80 }]
        );
    }

    #[test]
    fn in_cluster_services_become_pod_selectors_on_the_target_port() {
        let want = vec![EgressTarget::Service {
            namespace: "models".into(),
            pod_selector: BTreeMap::from([("app".to_string(), "vllm".to_string())]),
            port: 8000,
        }];
        assert_eq!(targets_from_url("p", "http://vllm.models.svc:80/v1", &services(), &[]).unwrap(), want);
        assert_eq!(targets_from_url("p", "http://vllm.models.svc.cluster.local/v1", &services(), &[]).unwrap(), want);
        let mut no_target = services();
        no_target.get_mut("models/vllm").unwrap().target_port = None;
        assert_eq!(
            targets_from_url("p", "http://vllm.models.svc:9000", &no_target, &[]).unwrap(),
            vec![EgressTarget::Service {
                namespace: "models".into(),
                pod_selector: BTreeMap::from([("app".to_string(), "vllm".to_string())]),
                port: 9000
            }]
        );
        let err = targets_from_url("provider \"local\"", "http://other.models.svc/v1", &services(), &[]).unwrap_err();
        assert!(err.to_string().contains("provider \"local\"") && err.to_string().contains("models/other"), "{err}");
    }

    #[test]
    fn public_hosts_need_configured_cidrs_and_the_error_names_the_provider() {
        let err = targets_from_url("provider \"openai\"", "https://api.openai.com/v1", &services(), &[]).unwrap_err();
        assert!(matches!(err, NetworkError::PublicHostWithoutCidrs { .. }));
        let text = err.to_string();
        assert!(text.contains("provider \"openai\"") && text.contains("api.openai.com"), "{text}");
        let cidrs = vec!["203.0.113.0/24".to_string(), "2001:db8::/32".to_string()];
        assert_eq!(
            targets_from_url("provider \"openai\"", "https://api.openai.com/v1", &services(), &cidrs).unwrap(),
            vec![
                EgressTarget::IpBlock { cidr: "203.0.113.0/24".into(), port: 443 },
                EgressTarget::IpBlock { cidr: "2001:db8::/32".into(), port: 443 }
            ]
        );
        let bad = vec!["203.0.113.0/33".to_string()];
        assert!(matches!(
            targets_from_url("p", "https://api.openai.com", &services(), &bad),
            Err(NetworkError::BadCidr { .. })
        ));
        assert!(matches!(targets_from_url("p", "ftp://x", &services(), &[]), Err(NetworkError::BadUrl { .. })));
        assert!(matches!(targets_from_url("p", "http://x:0/", &services(), &[]), Err(NetworkError::BadUrl { .. })));
    }

    #[test]
    fn run_targets_cover_the_model_providers_and_s3() {
        let run = test_run();
        let settings = NetworkSettings {
            services: services(),
            provider_cidrs: BTreeMap::from([("openai".to_string(), vec!["203.0.113.0/24".to_string()])]),
            s3_cidrs: Vec::new(),
        };
        let targets = run_egress_targets(&run, &settings).unwrap();
        assert_eq!(
            targets,
            vec![
                EgressTarget::Service {
                    namespace: "models".into(),
                    pod_selector: BTreeMap::from([("app".to_string(), "vllm".to_string())]),
                    port: 8000
                },
                EgressTarget::IpBlock { cidr: "10.1.2.3/32".into(), port: 9000 },
                // The S3 endpoint.
                EgressTarget::IpBlock { cidr: "10.9.9.9/32".into(), port: 9000 },
                EgressTarget::IpBlock { cidr: "203.0.113.0/24".into(), port: 443 },
            ]
        );
        // Without the CIDRs for the public provider, the run cannot be confined: an error.
        let err =
            run_egress_targets(&run, &NetworkSettings { services: services(), ..Default::default() }).unwrap_err();
        assert!(err.to_string().contains("provider \"openai\""), "{err}");
    }

    #[test]
    fn the_policy_denies_ingress_and_allows_only_dns_and_the_targets() {
        let run = test_run();
        let targets = vec![
            EgressTarget::Service {
                namespace: "models".into(),
                pod_selector: BTreeMap::from([("app".to_string(), "vllm".to_string())]),
                port: 8000,
            },
            EgressTarget::IpBlock { cidr: "10.1.2.3/32".into(), port: 9000 },
        ];
        let policy = network_policy(&run, &targets).unwrap();
        let yaml: Value = serde_yaml::from_str(&serde_yaml::to_string(&policy).unwrap()).unwrap();
        assert_eq!(yaml["metadata"]["name"], "demo-trials");
        assert_eq!(yaml["metadata"]["namespace"], "evals");
        assert_eq!(yaml["metadata"]["ownerReferences"][0]["kind"], "EvaluationRun");
        assert_eq!(yaml["metadata"]["ownerReferences"][0]["controller"], true);
        let spec = &yaml["spec"];
        assert_eq!(spec["podSelector"]["matchLabels"]["lightsout.dev/run"], "demo");
        assert_eq!(spec["policyTypes"], serde_yaml::from_str::<Value>("[Ingress, Egress]").unwrap());
        // Declared and empty: deny all ingress.
        assert_eq!(spec["ingress"], Value::Sequence(vec![]));
        let egress = spec["egress"].as_sequence().unwrap();
        assert_eq!(egress.len(), 3);
        let dns: Value = serde_yaml::from_str(
            "to: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: kube-system}}, \
             podSelector: {matchLabels: {k8s-app: kube-dns}}}]\n\
             ports: [{port: 53, protocol: UDP}, {port: 53, protocol: TCP}]",
        )
        .unwrap();
        assert_eq!(egress[0], dns);
        let service: Value = serde_yaml::from_str(
            "to: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: models}}, \
             podSelector: {matchLabels: {app: vllm}}}]\nports: [{port: 8000, protocol: TCP}]",
        )
        .unwrap();
        assert_eq!(egress[1], service);
        let block: Value =
            serde_yaml::from_str("to: [{ipBlock: {cidr: 10.1.2.3/32}}]\nports: [{port: 9000, protocol: TCP}]").unwrap();
        assert_eq!(egress[2], block);
    }

    #[test]
    fn long_run_names_keep_the_policy_name_valid() {
        let long = "r".repeat(253);
        let name = network_policy_name(&long);
        assert!(name.len() <= 253 && name.ends_with("-trials"));
        assert_ne!(network_policy_name(&long), network_policy_name(&"s".repeat(253)));
    }
}
