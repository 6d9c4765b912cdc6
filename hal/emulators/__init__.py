"""Controller emulators that serve the MuJoCo twin over real UDP sockets (for tests and for
``backend.emulate=true``): :mod:`hal.emulators.common` (the lock-step cycle loop, session
states, fault injection, stop on missed replies), :mod:`hal.emulators.lwr_fri`,
:mod:`hal.emulators.sunrise_fri`, :mod:`hal.emulators.rsi`."""
