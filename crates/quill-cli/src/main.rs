//! The `quill` command. `quill` (or `quill train [options]`) runs the main job: training on
//! MNIST; `quill generate` samples text from a trained language model's checkpoint; `quill demo`
//! is a tour of zero-copy views; `quill bench ...` runs the benchmarks.

mod bench;
mod demo;
mod generate;
mod train;

const USAGE: &str = "usage: quill [train [options] | generate [options] | demo | bench copy|ops|autograd [--rounds N]]
  (quill --help-train lists the training options, quill generate --help the sampling ones)";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        None => train::run(&[]),
        Some("train") => train::run(&args[1..]),
        Some(a) if a.starts_with("--") && a != "--help" && a != "--help-train" => train::run(&args),
        Some("--help-train") => {
            println!("{}", train::USAGE);
            Ok(())
        }
        Some("demo") => demo::run().map_err(|e| e.to_string()),
        Some("generate") => match generate::run(&args[1..]) {
            Err(e) if e == generate::USAGE => {
                println!("{e}");
                Ok(())
            }
            r => r,
        },
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
