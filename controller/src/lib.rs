//! The Lightsout Kubernetes controller: reconciles EvaluationRuns into per-trial Jobs.

pub mod backoff;
pub mod budget;
pub mod comparison;
pub mod context;
pub mod error;
pub mod evaluation_schedule;
pub mod finalize;
pub mod http;
pub mod job;
pub mod judge_queue;
mod judging;
pub mod labels;
pub mod leader;
pub mod metrics;
pub mod network;
pub mod observation;
pub mod observe;
pub mod prepare;
pub mod queue_admission;
pub mod reconcile;
mod record;
pub mod run_state;
pub mod schedule;
pub mod shutdown;
pub mod status;

/// Selects ring as the process's TLS crypto provider. The dependency graph enables both of
/// rustls's providers (kube asks for ring, the AWS SDK for aws-lc-rs), and rustls then refuses
/// to guess: the first TLS client (a `kube::Client` from a kubeconfig) would panic. Call it
/// first thing in `main`; calling it again is harmless.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn a_tls_client_can_be_built_once_the_provider_is_chosen() {
        super::install_crypto_provider();
        super::install_crypto_provider();
        let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        assert!(kube::Client::try_from(config).is_ok());
    }
}
