//! Kubeconfig files for the test control plane's users: certificate users (the admin, the
//! controller manager, the scheduler) and token users (a ServiceAccount, to run a controller
//! with exactly the RBAC a chart gives it).

use std::path::Path;

use anyhow::Context as _;
use base64::Engine as _;

/// How a kubeconfig's user authenticates.
pub enum Credentials<'a> {
    /// A client certificate and key (PEM).
    Certificate { cert_pem: &'a str, key_pem: &'a str },
    /// A bearer token.
    Token(&'a str),
}

/// Writes a kubeconfig for `server` (trusting `ca_pem`) with one context, `testkit`, whose
/// default namespace is `namespace`.
pub fn write(path: &Path, server: &str, ca_pem: &str, credentials: Credentials, namespace: &str) -> anyhow::Result<()> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    let user = match credentials {
        Credentials::Certificate { cert_pem, key_pem } => serde_json::json!({
            "client-certificate-data": b64(cert_pem),
            "client-key-data": b64(key_pem),
        }),
        Credentials::Token(token) => serde_json::json!({"token": token}),
    };
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "testkit", "cluster": {"server": server, "certificate-authority-data": b64(ca_pem)}}],
        "users": [{"name": "testkit", "user": user}],
        "contexts": [{"name": "testkit", "context": {"cluster": "testkit", "user": "testkit", "namespace": namespace}}],
        "current-context": "testkit",
    });
    let text = serde_yaml::to_string(&config)?;
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    // Credentials: readable by this user only (kubectl and helm warn otherwise).
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

/// A `kube::Client` from a kubeconfig file. A client belongs to the tokio runtime it was made
/// in (its connections are tasks there), so each test makes its own.
pub async fn client(path: &Path) -> anyhow::Result<kube::Client> {
    crate::install_crypto_provider();
    let kubeconfig =
        kube::config::Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(config)?)
}
