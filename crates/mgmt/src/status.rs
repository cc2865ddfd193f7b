//! ControlResponse status codes. NFD follows HTTP conventions; the comments
//! say where NFD (and ndn-cxx's Dispatcher) use each one.

/// 200: the command succeeded; the body echoes the effective ControlParameters.
pub const OK: u32 = 200;
/// 400: the ControlParameters are malformed or fail the command's validation
/// (ndn-cxx Dispatcher: "failed in validating parameters"; faces/create:
/// "Malformed command", "Non-canonical remote URI"; faces/query: "Malformed filter").
pub const BAD_REQUEST: u32 = 400;
/// 403: the command Interest failed authentication or authorization
/// (ndn-cxx Dispatcher: "authorization rejected").
pub const FORBIDDEN: u32 = 403;
/// 404: the object the command names does not exist (faces/update: "Specified
/// face does not exist"; strategy-choice/set: unknown strategy).
pub const NOT_FOUND: u32 = 404;
/// 406: the request cannot be honoured as asked (faces/create: "Unsupported
/// protocol", or a face factory refusing the requested parameters).
pub const NOT_ACCEPTABLE: u32 = 406;
/// 408: face creation timed out (older NFD: "Failed to create face").
pub const REQUEST_TIMEOUT: u32 = 408;
/// 409: conflict with existing state (faces/create: "Face with remote URI
/// already exists", body = that face's parameters; faces/update: "Invalid
/// properties specified", body = the offending fields).
pub const CONFLICT: u32 = 409;
/// 410: the face the command refers to is gone (older NFD local-control commands).
pub const GONE: u32 = 410;
/// 500: internal error while executing the command.
pub const INTERNAL_ERROR: u32 = 500;
/// 501: the forwarder does not implement the command, verb or protocol
/// (older NFD faces/create: "Unsupported protocol").
pub const NOT_IMPLEMENTED: u32 = 501;
/// 504: the remote end did not answer in time (faces/create on a connection-
/// oriented protocol).
pub const GATEWAY_TIMEOUT: u32 = 504;

/// Short reason phrase for a status code.
pub fn reason(code: u32) -> &'static str {
    match code {
        OK => "OK",
        BAD_REQUEST => "Bad Request",
        FORBIDDEN => "Forbidden",
        NOT_FOUND => "Not Found",
        NOT_ACCEPTABLE => "Not Acceptable",
        REQUEST_TIMEOUT => "Request Timeout",
        CONFLICT => "Conflict",
        GONE => "Gone",
        INTERNAL_ERROR => "Internal Error",
        NOT_IMPLEMENTED => "Not Implemented",
        GATEWAY_TIMEOUT => "Gateway Timeout",
        _ => match code / 100 {
            2 => "Success",
            4 => "Client Error",
            5 => "Server Error",
            _ => "Unknown",
        },
    }
}

/// True for the 2xx codes.
pub fn is_success(code: u32) -> bool {
    (200..300).contains(&code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons() {
        assert_eq!(reason(OK), "OK");
        assert_eq!(reason(CONFLICT), "Conflict");
        assert_eq!(reason(204), "Success");
        assert_eq!(reason(499), "Client Error");
        assert_eq!(reason(599), "Server Error");
        assert_eq!(reason(0), "Unknown");
        assert!(is_success(OK) && !is_success(BAD_REQUEST) && !is_success(199));
    }
}
