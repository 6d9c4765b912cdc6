"""Real-controller backends of the HAL (UDP clients written from the documented protocol facts).

Each backend passes the safety gate (:func:`hal.safety.require_passing_dry_run`) before it
sends anything, commands only through the one-cycle step guard
:class:`hal.real.guard.StepGuard`, stops on communication loss (watchdog), keeps link
statistics and returns a
:class:`hal.protocol.Recording` whose ``valid`` mask marks lost and rejoin samples.
Backends: :mod:`hal.real.lwr_fri` (KUKA LWR4+ FRI), :mod:`hal.real.sunrise_fri`
(KUKA LBR iiwa Sunrise FRI), :mod:`hal.real.rsi` (KUKA RSI, XML over UDP) and the optional
:mod:`hal.real.ros2` (needs rclpy). Emulators serving the twin: :mod:`hal.emulators`.
"""
