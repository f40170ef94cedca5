//! A container's environment as the kubelet builds it: `envFrom`, then `env` in order
//! (`value` with `$(VAR)` expansion, `secretKeyRef`, `configMapKeyRef`, downward API
//! `fieldRef` and `resourceFieldRef`), then the variables every container gets (the API
//! server's Service, `HOSTNAME`, a default `PATH`).

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret};
use kube::api::Api;
use kube::Client;

/// Why a container's configuration cannot be made yet (the kubelet reports it as
/// `CreateContainerConfigError` and tries again).
#[derive(Debug)]
pub struct ConfigError(pub String);

/// Expands `$(NAME)` from `vars` as Kubernetes does: `$$` is a literal `$`, and a reference to
/// an unknown name stays as written.
pub fn expand(input: &str, vars: &HashMap<String, String>) -> String {
    let mut out = String::with_capacity(input.len());
    let bytes = input.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'$' && i + 1 < bytes.len() {
            if bytes[i + 1] == b'$' {
                out.push('$');
                i += 2;
                continue;
            }
            if bytes[i + 1] == b'(' {
                if let Some(close) = input[i + 2..].find(')') {
                    let name = &input[i + 2..i + 2 + close];
                    if let Some(value) = vars.get(name) {
                        out.push_str(value);
                        i += 3 + close;
                        continue;
                    }
                }
            }
        }
        let ch = input[i..].chars().next().unwrap();
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

async fn secret_data(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<BTreeMap<String, String>>, ConfigError> {
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| ConfigError(format!("reading secret {name:?}: {e}")))?;
    Ok(secret.map(|s| {
        let mut data: BTreeMap<String, String> = s
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
            .collect();
        data.extend(s.string_data.unwrap_or_default());
        data
    }))
}

async fn config_map_data(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<BTreeMap<String, String>>, ConfigError> {
    let config_map = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| ConfigError(format!("reading configmap {name:?}: {e}")))?;
    Ok(config_map.map(|c| c.data.unwrap_or_default()))
}

/// The value of a downward API field path (`metadata.name`, `metadata.labels['k']`, …).
pub fn field_value(pod: &Pod, path: &str, pod_ip: &str) -> Result<String, ConfigError> {
    let meta = &pod.metadata;
    let indexed = |prefix: &str| path.strip_prefix(prefix).and_then(|rest| rest.strip_suffix("']")).map(String::from);
    if let Some(key) = indexed("metadata.labels['") {
        return Ok(meta.labels.as_ref().and_then(|l| l.get(&key)).cloned().unwrap_or_default());
    }
    if let Some(key) = indexed("metadata.annotations['") {
        return Ok(meta.annotations.as_ref().and_then(|a| a.get(&key)).cloned().unwrap_or_default());
    }
    let spec = pod.spec.as_ref();
    Ok(match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "metadata.labels" => format_map(meta.labels.as_ref()),
        "metadata.annotations" => format_map(meta.annotations.as_ref()),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec.and_then(|s| s.service_account_name.clone()).unwrap_or_default(),
        "status.hostIP" | "status.hostIPs" => "127.0.0.1".into(),
        "status.podIP" | "status.podIPs" => pod_ip.into(),
        other => return Err(ConfigError(format!("unsupported fieldPath {other:?}"))),
    })
}

/// `key="value"` lines, sorted, as the downward API writes a whole label or annotation map.
fn format_map(map: Option<&BTreeMap<String, String>>) -> String {
    map.map(|m| m.iter().map(|(k, v)| format!("{k}={v:?}")).collect::<Vec<_>>().join("\n")).unwrap_or_default()
}

/// A resource of the container (`limits.cpu`, `requests.memory`, …) in the divisor's unit; the
/// node's capacity when no limit is set.
pub fn resource_value(container: &Container, resource: &str, divisor: Option<&str>) -> Result<String, ConfigError> {
    let resources = container.resources.as_ref();
    let (kind, name) = resource.split_once('.').ok_or_else(|| ConfigError(format!("bad resource {resource:?}")))?;
    let quantities = match kind {
        "limits" => resources.and_then(|r| r.limits.as_ref()),
        "requests" => resources.and_then(|r| r.requests.as_ref()),
        _ => None,
    };
    let raw = quantities.and_then(|q| q.get(name)).map(|q| q.0.clone()).unwrap_or_else(|| match name {
        "cpu" => crate::kubelet::node::CPU_CAPACITY.into(),
        "memory" => crate::kubelet::node::MEMORY_CAPACITY.into(),
        _ => "0".into(),
    });
    let value = parse_quantity(&raw);
    let divisor = divisor.map(parse_quantity).filter(|d| *d > 0.0).unwrap_or(1.0);
    Ok(format!("{}", (value / divisor).ceil() as i64))
}

/// A Kubernetes quantity as a number (`500m` → 0.5, `1Gi` → 1073741824).
pub fn parse_quantity(text: &str) -> f64 {
    let suffixes: [(&str, f64); 13] = [
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Ti", 1024f64.powi(4)),
        ("Pi", 1024f64.powi(5)),
        ("Ei", 1024f64.powi(6)),
        ("n", 1e-9),
        ("u", 1e-6),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
    ];
    for (suffix, factor) in suffixes {
        if let Some(number) = text.strip_suffix(suffix) {
            return number.parse::<f64>().unwrap_or(0.0) * factor;
        }
    }
    text.parse().unwrap_or(0.0)
}

/// The container's environment, in the order the kubelet gives it.
pub async fn resolve(
    client: &Client,
    pod: &Pod,
    container: &Container,
    pod_ip: &str,
    api_port: u16,
) -> Result<Vec<(String, String)>, ConfigError> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let mut order: Vec<String> = Vec::new();
    let mut vars: HashMap<String, String> = HashMap::new();
    let set = |order: &mut Vec<String>, vars: &mut HashMap<String, String>, name: String, value: String| {
        if !vars.contains_key(&name) {
            order.push(name.clone());
        }
        vars.insert(name, value);
    };
    // The kubelet's service variables for the API server (kube-proxy's job, done here by
    // pointing straight at the loopback API server).
    set(&mut order, &mut vars, "KUBERNETES_SERVICE_HOST".into(), "127.0.0.1".into());
    set(&mut order, &mut vars, "KUBERNETES_SERVICE_PORT".into(), api_port.to_string());
    set(&mut order, &mut vars, "KUBERNETES_SERVICE_PORT_HTTPS".into(), api_port.to_string());
    for source in container.env_from.iter().flatten() {
        let prefix = source.prefix.clone().unwrap_or_default();
        let data = if let Some(r) = &source.config_map_ref {
            let found = config_map_data(client, &namespace, &r.name).await?;
            match (found, r.optional.unwrap_or(false)) {
                (Some(d), _) => d,
                (None, true) => BTreeMap::new(),
                (None, false) => return Err(ConfigError(format!("configmap {:?} not found", r.name))),
            }
        } else if let Some(r) = &source.secret_ref {
            let found = secret_data(client, &namespace, &r.name).await?;
            match (found, r.optional.unwrap_or(false)) {
                (Some(d), _) => d,
                (None, true) => BTreeMap::new(),
                (None, false) => return Err(ConfigError(format!("secret {:?} not found", r.name))),
            }
        } else {
            BTreeMap::new()
        };
        for (k, v) in data {
            set(&mut order, &mut vars, format!("{prefix}{k}"), v);
        }
    }
    for var in container.env.iter().flatten() {
        let value = match &var.value_from {
            None => expand(var.value.as_deref().unwrap_or(""), &vars),
            Some(from) => {
                if let Some(r) = &from.secret_key_ref {
                    let optional = r.optional.unwrap_or(false);
                    match secret_data(client, &namespace, &r.name).await?.and_then(|d| d.get(&r.key).cloned()) {
                        Some(v) => v,
                        None if optional => continue,
                        None => {
                            return Err(ConfigError(format!(
                                "secret {:?} has no key {:?} (or does not exist)",
                                r.name, r.key
                            )))
                        }
                    }
                } else if let Some(r) = &from.config_map_key_ref {
                    let optional = r.optional.unwrap_or(false);
                    match config_map_data(client, &namespace, &r.name).await?.and_then(|d| d.get(&r.key).cloned()) {
                        Some(v) => v,
                        None if optional => continue,
                        None => {
                            return Err(ConfigError(format!(
                                "configmap {:?} has no key {:?} (or does not exist)",
                                r.name, r.key
                            )))
                        }
                    }
                } else if let Some(r) = &from.field_ref {
                    field_value(pod, &r.field_path, pod_ip)?
                } else if let Some(r) = &from.resource_field_ref {
                    resource_value(container, &r.resource, r.divisor.as_ref().map(|d| d.0.as_str()))?
                } else {
                    String::new()
                }
            }
        };
        set(&mut order, &mut vars, var.name.clone(), value);
    }
    if !vars.contains_key("HOSTNAME") {
        set(&mut order, &mut vars, "HOSTNAME".into(), pod.metadata.name.clone().unwrap_or_default());
    }
    if !vars.contains_key("PATH") {
        set(
            &mut order,
            &mut vars,
            "PATH".into(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
        );
    }
    Ok(order
        .into_iter()
        .map(|name| {
            let value = vars[&name].clone();
            (name, value)
        })
        .collect())
}

/// The container's command line: `command` (else the image's entrypoint, which the testkit's
/// images do not have) and `args`, with `$(VAR)` expanded from its environment.
pub fn command_line(container: &Container, env: &[(String, String)]) -> Result<Vec<String>, ConfigError> {
    let vars: HashMap<String, String> = env.iter().cloned().collect();
    let mut line: Vec<String> = container.command.iter().flatten().map(|c| expand(c, &vars)).collect();
    if line.is_empty() {
        return Err(ConfigError(format!(
            "container {:?} sets no command, and the testkit's images have no entrypoint",
            container.name
        )));
    }
    line.extend(container.args.iter().flatten().map(|a| expand(a, &vars)));
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_like_kubernetes() {
        let vars: HashMap<String, String> = [("A".to_string(), "x".to_string())].into();
        assert_eq!(expand("$(A)-$(B)-$$(A)-$", &vars), "x-$(B)-$(A)-$");
    }

    #[test]
    fn parses_quantities() {
        assert_eq!(parse_quantity("500m"), 0.5);
        assert_eq!(parse_quantity("1Gi"), 1073741824.0);
        assert_eq!(parse_quantity("2"), 2.0);
    }
}
