#include "dlaunch/nettle_api.hpp"

#include "dlaunch/shared_library.hpp"

namespace dlaunch {

Result<const NettleApi*> nettle_api() {
    static NettleApi api;
    static SharedLibrary so(DLAUNCH_LIBNETTLE_SONAME);
    static const bool loaded = [] {
        so.bind(api.hmac256_set_key, "nettle_hmac_sha256_set_key");
        so.bind(api.hmac256_update, "nettle_hmac_sha256_update");
        so.bind(api.hmac256_digest, "nettle_hmac_sha256_digest");
        so.bind(api.sha_init, "nettle_sha256_init");
        so.bind(api.sha_update, "nettle_sha256_update");
        so.bind(api.sha_digest, "nettle_sha256_digest");
        so.bind(api.equal_sec, "nettle_memeql_sec");
        so.bind(api.b64_encode_raw, "nettle_base64_encode_raw");
        so.bind(api.b64_decode_init, "nettle_base64_decode_init");
        so.bind(api.b64_decode_update, "nettle_base64_decode_update");
        so.bind(api.b64_decode_final, "nettle_base64_decode_final");
        return so.ok();
    }();
    if (!loaded)
        return Error{"cannot load " DLAUNCH_LIBNETTLE_SONAME ": " + so.error(),
                     "install Nettle (apt-get install libnettle8), which dlaunch's proofs and etcd client use"};
    return &api;
}

}  // namespace dlaunch
