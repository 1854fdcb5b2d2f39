/**
 * The runtime's modules (every subsystem), imported when a command's action needs them rather than when the
 * CLI starts: `--version`, `--help` and the commands that only talk to a running gateway start without them
 * (docs/cli.md).
 */
export const loadRuntime = () => import('../runtime.js');
