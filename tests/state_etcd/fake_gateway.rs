use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

#[derive(Clone)]
pub enum Reply {
    Status(u16, String),
    /// A 200 whose body never ends (a Content-Length of 1 GiB).
    Huge,
    /// Reads the request and never answers.
    Silent,
}

impl Reply {
    pub fn ok(body: impl Into<String>) -> Reply {
        Reply::Status(200, body.into())
    }
}

type Answer = dyn Fn(&str) -> Reply + Send + Sync;

pub struct FakeGateway {
    pub addr: String,
    paths: Arc<Mutex<Vec<String>>>,
}

impl FakeGateway {
    pub fn start(answer: impl Fn(&str) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let paths = Arc::new(Mutex::new(Vec::new()));
        let answer: Arc<Answer> = Arc::new(answer);
        let seen = Arc::clone(&paths);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let (answer, seen) = (Arc::clone(&answer), Arc::clone(&seen));
                std::thread::spawn(move || serve(conn, &*answer, &seen));
            }
        });
        FakeGateway { addr, paths }
    }

    pub fn url(&self) -> String {
        format!("etcd://{}/k0sform/hostile", self.addr)
    }

    /// The paths requested so far.
    pub fn paths(&self) -> Vec<String> {
        self.paths.lock().unwrap().clone()
    }
}

fn serve(conn: TcpStream, answer: &Answer, seen: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let path = line.split(' ').nth(1).unwrap_or("").to_string();
    let mut length = 0;
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    seen.lock().unwrap().push(path.clone());
    let mut out = conn;
    let head = |status: u16, len: usize| {
        format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
        )
    };
    match answer(&path) {
        Reply::Status(status, text) => {
            let _ = out.write_all(head(status, text.len()).as_bytes());
            let _ = out.write_all(text.as_bytes());
        }
        Reply::Huge => {
            let _ = out.write_all(head(200, 1 << 30).as_bytes());
            let chunk = vec![b' '; 64 << 10];
            // Until the client hangs up.
            for _ in 0..(1 << 14) {
                if out.write_all(&chunk).is_err() {
                    return;
                }
            }
        }
        Reply::Silent => {
            // Until the client hangs up.
            let _ = reader.read(&mut [0; 1]);
        }
    }
}
