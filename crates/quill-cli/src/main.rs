//! The `quill` command. `quill` (or `quill train [options]`) runs the main job: training on
//! MNIST; `quill generate` samples text from a trained language model's checkpoint; `quill
//! evaluate` / `quill predict` score and apply the image job's; `quill demo` is a tour of
//! zero-copy views; `quill bench ...` runs the benchmarks.

mod bench;
mod demo;
mod evaluate;
mod generate;
mod report;
mod train;

const USAGE: &str = "usage: quill [train [options] | generate | evaluate | predict [options] | demo | bench copy|ops|autograd [--rounds N]] [--quiet | --json]
  (quill --help-train lists the training options; quill generate|evaluate|predict --help theirs)
  --quiet  print only the result (final accuracy, predictions, text, benchmark tables) and errors
  --json   print one JSON object per line (each with an \"event\" field) instead of text";

/// A command's `--help` comes back as its usage text: printed, and not an error.
fn usage_ok(r: Result<(), String>, usage: &str) -> Result<(), String> {
    match r {
        Err(e) if e == usage => {
            println!("{e}");
            Ok(())
        }
        r => r,
    }
}

fn main() {
    let args = match report::take_flags(std::env::args().skip(1).collect()) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let result = match args.first().map(String::as_str) {
        None => train::run(&[]),
        Some("train") => train::run(&args[1..]),
        Some(a) if a.starts_with("--") && a != "--help" && a != "--help-train" => train::run(&args),
        Some("--help-train") => {
            println!("{}", train::USAGE);
            Ok(())
        }
        Some("demo") => demo::run().map_err(|e| e.to_string()),
        Some("generate") => usage_ok(generate::run(&args[1..]), generate::USAGE),
        Some("evaluate") => usage_ok(evaluate::evaluate(&args[1..]), evaluate::EVALUATE_USAGE),
        Some("predict") => usage_ok(evaluate::predict(&args[1..]), evaluate::PREDICT_USAGE),
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
