//! The `quill` command. `quill` (or `quill demo`) runs the main job, for now a tour of
//! zero-copy views; `quill bench copy` runs the copy-kernel benchmark against NumPy.

mod bench;
mod demo;

const USAGE: &str =
    "usage: quill [demo | bench copy [--rounds N] | bench ops [--rounds N] [--only matmul|elementwise|reduce]]";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        None | Some("demo") => demo::run().map_err(|e| e.to_string()),
        Some("bench") => bench::run(&args[1..]),
        Some("-h") | Some("--help") => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(format!("unknown command '{other}'\n{USAGE}")),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}
