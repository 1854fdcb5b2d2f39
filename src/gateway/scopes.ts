/**
 * Operator scopes, with the same implications OpenClaw's gateway applies, so a real OpenClaw client that
 * asks for the least privilege a method needs gets exactly that: `operator.admin` grants everything,
 * `operator.write` also grants `operator.read` (and the session-level scopes), and `operator.sessions.read`
 * is granted by `operator.read` or `operator.sessions.write`.
 */
export const OperatorScopes = {
  admin: 'operator.admin',
  read: 'operator.read',
  write: 'operator.write',
  sessionsRead: 'operator.sessions.read',
  sessionsWrite: 'operator.sessions.write',
  approvals: 'operator.approvals',
  pairing: 'operator.pairing',
  talk: 'operator.talk',
} as const;

const impliedByWrite = new Set<string>([
  OperatorScopes.read,
  OperatorScopes.talk,
  OperatorScopes.sessionsRead,
  OperatorScopes.sessionsWrite,
]);

/** True when `granted` satisfies one required scope. */
export function scopeSatisfied(required: string, granted: ReadonlyArray<string>): boolean {
  if (granted.includes(required) || granted.includes(OperatorScopes.admin)) return true;
  if (impliedByWrite.has(required) && granted.includes(OperatorScopes.write)) return true;
  if (
    required === OperatorScopes.sessionsRead &&
    (granted.includes(OperatorScopes.read) || granted.includes(OperatorScopes.sessionsWrite))
  ) {
    return true;
  }
  return false;
}

/** The first required scope `granted` does not satisfy, or undefined when all are satisfied. */
export function missingScope(
  required: ReadonlyArray<string>,
  granted: ReadonlyArray<string>,
): string | undefined {
  return required.find((scope) => !scopeSatisfied(scope, granted));
}
