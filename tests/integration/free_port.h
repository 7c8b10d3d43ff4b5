#pragma once

namespace weft::testing {

// A TCP port on 127.0.0.1 that was free when asked (bound once and released). It is drawn at
// random below the kernel's ephemeral range, where no outgoing connection is given it before
// its user binds it; whatever port the kernel gives when that range leaves no room below it.
int FreePort();

}  // namespace weft::testing
