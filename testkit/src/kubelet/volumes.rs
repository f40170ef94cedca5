//! A pod's volumes as directories of the pod's own: `emptyDir`, `configMap`, `secret`,
//! `downwardAPI`, `projected` (service-account tokens from the TokenRequest API, the CA bundle,
//! the namespace) and `hostPath`. A missing ConfigMap or Secret is retried, as the kubelet
//! retries a mount, unless the volume is optional.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, DownwardAPIVolumeFile, KeyToPath, Pod, Secret, ServiceAccount, Volume};
use kube::api::Api;
use kube::Client;

use super::env::{field_value, resource_value};

/// A volume's files (relative path → content) and the modes some of them ask for.
type Files = (BTreeMap<String, Vec<u8>>, BTreeMap<String, u32>);

/// Why a volume cannot be set up yet.
#[derive(Debug)]
pub struct MountError(pub String);

fn io(path: &Path, e: std::io::Error) -> MountError {
    MountError(format!("{}: {e}", path.display()))
}

/// Writes `files` (relative path → content) into `dir` with `mode`, replacing what was there.
fn write_files(
    dir: &Path,
    files: &BTreeMap<String, Vec<u8>>,
    modes: &BTreeMap<String, u32>,
    default_mode: u32,
) -> Result<(), MountError> {
    for (relative, content) in files {
        if relative.split('/').any(|part| part == ".." || part.is_empty()) {
            return Err(MountError(format!("volume path {relative:?} is not a relative path below the volume")));
        }
        let path = dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
            std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o755)).map_err(|e| io(parent, e))?;
        }
        std::fs::write(&path, content).map_err(|e| io(&path, e))?;
        let mode = modes.get(relative).copied().unwrap_or(default_mode);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).map_err(|e| io(&path, e))?;
    }
    Ok(())
}

/// Selects `items` (key → path) of `data`, or all keys at their own names.
fn select(data: BTreeMap<String, Vec<u8>>, items: Option<&Vec<KeyToPath>>, what: &str) -> Result<Files, MountError> {
    let mut files = BTreeMap::new();
    let mut modes = BTreeMap::new();
    match items {
        None => files = data,
        Some(items) => {
            for item in items {
                let content =
                    data.get(&item.key).ok_or_else(|| MountError(format!("{what} has no key {:?}", item.key)))?;
                files.insert(item.path.clone(), content.clone());
                if let Some(mode) = item.mode {
                    modes.insert(item.path.clone(), mode as u32);
                }
            }
        }
    }
    Ok((files, modes))
}

/// Which kind of object a volume source takes its keys from.
#[derive(Clone, Copy)]
enum Keyed {
    ConfigMap,
    Secret,
}

/// The files of a ConfigMap or Secret source: its `items` (or all keys); none when it is
/// missing and `optional`, an error (retried) when it is missing otherwise.
async fn keyed_files(
    client: &Client,
    namespace: &str,
    kind: Keyed,
    name: &str,
    items: Option<&Vec<KeyToPath>>,
    optional: Option<bool>,
) -> Result<Files, MountError> {
    let (what, data) = match kind {
        Keyed::ConfigMap => (format!("configmap {name:?}"), config_map(client, namespace, name).await?),
        Keyed::Secret => (format!("secret {name:?}"), secret(client, namespace, name).await?),
    };
    match data {
        Some(data) => select(data, items, &what),
        None if optional.unwrap_or(false) => Ok(Files::default()),
        None => Err(MountError(format!("{what} not found"))),
    }
}

async fn config_map(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<BTreeMap<String, Vec<u8>>>, MountError> {
    let found = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| MountError(format!("configmap {name:?}: {e}")))?;
    Ok(found.map(|c| {
        let mut data: BTreeMap<String, Vec<u8>> =
            c.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.into_bytes())).collect();
        data.extend(c.binary_data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)));
        data
    }))
}

async fn secret(client: &Client, namespace: &str, name: &str) -> Result<Option<BTreeMap<String, Vec<u8>>>, MountError> {
    let found = Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| MountError(format!("secret {name:?}: {e}")))?;
    Ok(found.map(|s| {
        let mut data: BTreeMap<String, Vec<u8>> =
            s.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect();
        data.extend(s.string_data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.into_bytes())));
        data
    }))
}

fn downward_files(pod: &Pod, items: &[DownwardAPIVolumeFile], pod_ip: &str) -> Result<Files, MountError> {
    let mut files = BTreeMap::new();
    let mut modes = BTreeMap::new();
    for item in items {
        let value = if let Some(field) = &item.field_ref {
            field_value(pod, &field.field_path, pod_ip).map_err(|e| MountError(e.0))?
        } else if let Some(resource) = &item.resource_field_ref {
            let containers = pod.spec.as_ref().map(|s| s.containers.clone()).unwrap_or_default();
            let container = containers
                .iter()
                .find(|c| Some(&c.name) == resource.container_name.as_ref())
                .or_else(|| containers.first())
                .ok_or_else(|| MountError("no container for resourceFieldRef".into()))?;
            resource_value(container, &resource.resource, resource.divisor.as_ref().map(|d| d.0.as_str()))
                .map_err(|e| MountError(e.0))?
        } else {
            String::new()
        };
        files.insert(item.path.clone(), value.into_bytes());
        if let Some(mode) = item.mode {
            modes.insert(item.path.clone(), mode as u32);
        }
    }
    Ok((files, modes))
}

async fn service_account_token(
    client: &Client,
    pod: &Pod,
    audience: Option<&str>,
    expiration_seconds: Option<i64>,
) -> Result<Vec<u8>, MountError> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let account = pod.spec.as_ref().and_then(|s| s.service_account_name.clone()).unwrap_or_else(|| "default".into());
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: audience.map(|a| vec![a.to_string()]).unwrap_or_default(),
            expiration_seconds: Some(expiration_seconds.unwrap_or(3607)),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
            }),
        },
        ..Default::default()
    };
    let answer = Api::<ServiceAccount>::namespaced(client.clone(), &namespace)
        .create_token_request(&account, &Default::default(), &request)
        .await
        .map_err(|e| MountError(format!("a token for service account {namespace}/{account}: {e}")))?;
    Ok(answer.status.map(|s| s.token).unwrap_or_default().into_bytes())
}

/// Sets up every volume of `pod` under `root` (one directory each); their host paths by name.
pub async fn prepare(
    client: &Client,
    pod: &Pod,
    root: &Path,
    pod_ip: &str,
) -> Result<BTreeMap<String, PathBuf>, MountError> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let mut paths = BTreeMap::new();
    let volumes: Vec<Volume> = pod.spec.as_ref().and_then(|s| s.volumes.clone()).unwrap_or_default();
    for volume in volumes {
        if let Some(host) = &volume.host_path {
            paths.insert(volume.name.clone(), PathBuf::from(&host.path));
            continue;
        }
        let dir = root.join(&volume.name);
        std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
        if volume.empty_dir.is_some() {
            // The kubelet makes emptyDir world-writable: any uid of the pod may use it.
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).map_err(|e| io(&dir, e))?;
        } else if let Some(source) = &volume.config_map {
            let (files, modes) =
                keyed_files(client, &namespace, Keyed::ConfigMap, &source.name, source.items.as_ref(), source.optional)
                    .await?;
            write_files(&dir, &files, &modes, source.default_mode.unwrap_or(0o644) as u32)?;
        } else if let Some(source) = &volume.secret {
            let name = source.secret_name.clone().unwrap_or_default();
            let (files, modes) =
                keyed_files(client, &namespace, Keyed::Secret, &name, source.items.as_ref(), source.optional).await?;
            write_files(&dir, &files, &modes, source.default_mode.unwrap_or(0o644) as u32)?;
        } else if let Some(source) = &volume.downward_api {
            let (files, modes) = downward_files(pod, source.items.as_deref().unwrap_or_default(), pod_ip)?;
            write_files(&dir, &files, &modes, source.default_mode.unwrap_or(0o644) as u32)?;
        } else if let Some(projected) = &volume.projected {
            let mut files = BTreeMap::new();
            let mut modes = BTreeMap::new();
            for source in projected.sources.iter().flatten() {
                if let Some(token) = &source.service_account_token {
                    files.insert(
                        token.path.clone(),
                        service_account_token(client, pod, token.audience.as_deref(), token.expiration_seconds).await?,
                    );
                } else if let Some(c) = &source.config_map {
                    let (f, m) =
                        keyed_files(client, &namespace, Keyed::ConfigMap, &c.name, c.items.as_ref(), c.optional)
                            .await?;
                    files.extend(f);
                    modes.extend(m);
                } else if let Some(c) = &source.secret {
                    let (f, m) =
                        keyed_files(client, &namespace, Keyed::Secret, &c.name, c.items.as_ref(), c.optional).await?;
                    files.extend(f);
                    modes.extend(m);
                } else if let Some(d) = &source.downward_api {
                    let (f, m) = downward_files(pod, d.items.as_deref().unwrap_or_default(), pod_ip)?;
                    files.extend(f);
                    modes.extend(m);
                }
            }
            write_files(&dir, &files, &modes, projected.default_mode.unwrap_or(0o644) as u32)?;
        } else {
            return Err(MountError(format!("volume {:?}: the testkit's kubelet supports emptyDir, configMap, secret, downwardAPI, projected and hostPath only", volume.name)));
        }
        paths.insert(volume.name.clone(), dir);
    }
    Ok(paths)
}
