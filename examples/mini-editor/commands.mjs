// Custom REPL commands of the mini_editor profile (cli_profiles.yaml).

/** `/show`: prints the document saved by the last request of this session. */
export function show(_args, session) {
  const last = session.history.at(-1);
  if (!last) return 'nothing saved yet';
  return last.output && typeof last.output === 'object' && 'path' in last.output ? `last saved: ${last.output.path}` : JSON.stringify(last.output);
}
