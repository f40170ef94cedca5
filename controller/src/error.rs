//! Reconcile errors, by a small fixed set of categories (the `category` label of
//! `lightsout_reconcile_errors_total`). A problem with the run's spec is not an error: it is the
//! run's `Accepted=False` condition. These are the failures a retry may cure.

/// A reconcile that could not finish; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("results store: {0}")]
    Store(String),
    #[error("the run's metadata: {0}")]
    Metadata(&'static str),
    #[error("judging: {0}")]
    Judge(String),
    /// The dataset's store did not answer; the run's `Accepted=False` condition says so too.
    #[error("dataset: {0}")]
    Dataset(String),
}

impl Error {
    /// The error's category, for metrics and logs.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kubernetes-api",
            Error::Store(_) => "results-store",
            Error::Metadata(_) => "metadata",
            Error::Judge(_) => "judge",
            Error::Dataset(_) => "dataset",
        }
    }

    pub fn store(context: impl std::fmt::Display, error: impl std::fmt::Display) -> Self {
        Error::Store(format!("{context}: {error}"))
    }
}

/// The result of a delete or patch of something that may already be gone: `404 Not Found` is
/// success (another pass, replica or the garbage collector got there first).
pub fn gone_is_ok<T>(result: Result<T, kube::Error>) -> Result<(), Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
