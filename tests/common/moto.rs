//! moto's S3 server for tests (a real S3-compatible server; `.ci/run` installs it), shared by
//! the CLI's tests and, by path, the worker's.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// moto's S3 server on a free loopback port, stopped on drop.
pub struct Moto {
    child: Child,
    port: u16,
}

impl Moto {
    pub fn start() -> Moto {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new("python3")
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs");
        let moto = Moto { child, port };
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "moto did not start: install it with pip install 'moto[server]==5.2.5'"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        moto
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Runs a Python snippet with a boto3 client `s3` for this server.
    pub fn python(&self, code: &str) -> String {
        let script = format!(
            "import boto3\ns3 = boto3.client('s3', endpoint_url='{}', aws_access_key_id='test', aws_secret_access_key='test', region_name='us-east-1')\n{code}",
            self.endpoint()
        );
        let output = Command::new("python3").args(["-c", &script]).output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    pub fn keys(&self) -> Vec<String> {
        let listing = self.python(
            "p = s3.get_paginator('list_objects_v2')\nfor page in p.paginate(Bucket='results'):\n    for o in page.get('Contents', []):\n        print(o['Key'])",
        );
        listing.lines().map(str::to_string).collect()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
