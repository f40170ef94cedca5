//! The stand-in kubelet's "registry": what each image reference holds. There is no container
//! engine here, so an image is a set of host files placed at paths of the container's root,
//! optionally on top of the host's own `/usr` and `/etc` (a Debian-like base). A reference the
//! registry does not know fails to pull (`ErrImagePull`, then `ImagePullBackOff`), as an image
//! missing from a real registry does; [`Images::fail_pulls`] makes a known image fail too.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// What one image holds.
#[derive(Debug, Clone, Default)]
pub struct Image {
    /// `(path in the container, host path)`: a host file or directory seen at that path,
    /// read-only (directories through an overlay, so the container may write over them).
    pub files: Vec<(PathBuf, PathBuf)>,
    /// The host's `/usr` (with `/bin`, `/lib`, …) and `/etc`, read-only, as the image's base.
    pub host_base: bool,
}

impl Image {
    /// An image on the host's base system.
    pub fn on_host_base() -> Image {
        Image { files: Vec::new(), host_base: true }
    }

    /// Adds a host file or directory at `path` in the image.
    pub fn with(mut self, path: impl Into<PathBuf>, host: impl Into<PathBuf>) -> Image {
        self.files.push((path.into(), host.into()));
        self
    }
}

#[derive(Debug, Default)]
struct Registry {
    images: HashMap<String, Image>,
    /// Pulls still to fail, by reference.
    failures: HashMap<String, u32>,
}

/// Image references the kubelet can run. Cheap to clone; clones share the registry.
#[derive(Debug, Clone, Default)]
pub struct Images {
    registry: Arc<Mutex<Registry>>,
}

impl Images {
    /// Makes `reference` pullable as `image` (replacing what it held).
    pub fn add(&self, reference: &str, image: Image) {
        self.registry.lock().unwrap().images.insert(reference.to_string(), image);
    }

    /// The next `count` pulls of `reference` fail, as a registry that is down would.
    pub fn fail_pulls(&self, reference: &str, count: u32) {
        self.registry.lock().unwrap().failures.insert(reference.to_string(), count);
    }

    /// Pulls `reference`: the image, or why it cannot be had.
    pub fn pull(&self, reference: &str) -> Result<Image, String> {
        let mut registry = self.registry.lock().unwrap();
        if let Some(left) = registry.failures.get_mut(reference) {
            if *left > 0 {
                *left -= 1;
                return Err(format!("failed to pull image \"{reference}\": the registry is unavailable"));
            }
        }
        registry.images.get(reference).cloned().ok_or_else(|| {
            format!("failed to pull image \"{reference}\": not found: manifest unknown (the testkit's registry has no such image)")
        })
    }
}
