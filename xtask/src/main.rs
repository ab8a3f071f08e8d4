fn main() {
    println!("xtask placeholder");
}
