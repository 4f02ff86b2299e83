//! The time-limit fixture in Rust: a body of "loop" never returns, "recurse" recurses without
//! end, any other body returns OK.

#[link(wasm_import_module = "wqhost")]
extern "C" {
    fn msg_body_len() -> i32;
}

static mut SINK: i32 = 0;

#[no_mangle]
pub extern "C" fn wqhost_abi_v1() {}

#[inline(never)]
fn recurse(n: i32) -> i32 {
    // The body is never empty here, so the recursion has no end the compiler could find.
    if unsafe { msg_body_len() } == 0 {
        return 0;
    }
    let next = unsafe { core::ptr::read_volatile(&n) } + 1;
    recurse(next) + 1
}

#[no_mangle]
pub extern "C" fn wqhost_handle() -> i32 {
    unsafe {
        match msg_body_len() {
            4 => loop {
                core::ptr::write_volatile(core::ptr::addr_of_mut!(SINK), core::ptr::read_volatile(core::ptr::addr_of!(SINK)) + 1);
            },
            7 => SINK = recurse(0),
            _ => {}
        }
    }
    0
}
