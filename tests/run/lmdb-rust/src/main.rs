// SPDX-License-Identifier: MIT
//! lmdb-rust: an unmodified Rust program for the `pmguard run` tests, on
//! Debian's lmdb crate (which links the system's liblmdb).
//!
//!   lmdb-rust write DIR TXNS PER   TXNS write transactions of PER records
//!   lmdb-rust verify DIR N         exactly N records, each intact
//!
//! The environment is opened with MDB_WRITEMAP.  Records as
//! tests/run/lmdb-prog.c writes them (key k%08u, value v%08u x 4), so
//! either program verifies the other's.  Exit 0 fine, 1 wrong data,
//! 2 usage or LMDB error.
use lmdb::{Cursor, Environment, EnvironmentFlags, Transaction, WriteFlags};
use std::path::Path;
use std::process::exit;

fn kv(i: u64) -> (String, String) {
    let i = i % 100_000_000;
    (format!("k{:08}", i), format!("v{:08}", i).repeat(4))
}

fn run(args: &[String]) -> Result<i32, lmdb::Error> {
    let env = Environment::new()
        .set_flags(EnvironmentFlags::WRITE_MAP)
        .set_map_size(1 << 30)
        .open(Path::new(&args[2]))?;
    let db = env.open_db(None)?;
    match (args[1].as_str(), args.len()) {
        ("write", 5) => {
            let (txns, per): (u64, u64) = match (args[3].parse(), args[4].parse()) {
                (Ok(t), Ok(p)) => (t, p),
                _ => return Ok(2),
            };
            for t in 0..txns {
                let mut txn = env.begin_rw_txn()?;
                for i in t * per..(t + 1) * per {
                    let (k, v) = kv(i);
                    txn.put(db, &k, &v, WriteFlags::empty())?;
                }
                txn.commit()?;
            }
            println!("lmdb-rust: wrote {} records", txns * per);
            Ok(0)
        }
        ("verify", 4) => {
            let n: u64 = match args[3].parse() {
                Ok(n) => n,
                _ => return Ok(2),
            };
            let txn = env.begin_ro_txn()?;
            for i in 0..n {
                let (k, v) = kv(i);
                match txn.get(db, &k) {
                    Ok(got) if got == v.as_bytes() => {}
                    _ => {
                        println!("lmdb-rust: record {} missing or corrupted", i);
                        return Ok(1);
                    }
                }
            }
            let mut cur = txn.open_ro_cursor(db)?;
            let entries = cur.iter_start().count() as u64;
            if entries != n {
                println!("lmdb-rust: {} entries, expected {}", entries, n);
                return Ok(1);
            }
            println!("lmdb-rust: {} records intact", n);
            Ok(0)
        }
        _ => Ok(2),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        exit(2);
    }
    exit(match run(&args) {
        Ok(rc) => rc,
        Err(e) => {
            println!("lmdb-rust: {}", e);
            2
        }
    });
}
