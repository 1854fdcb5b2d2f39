import { randomBytes } from 'node:crypto';
import { chmodSync, cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../util/index.js';

export interface StateDir {
  home: string;
  workspaceDir: string;
  token: string;
  /** True when the token was generated (and saved) by this start. */
  tokenGenerated: boolean;
}

/**
 * Prepares `$AGENTD_HOME`: the directory, the access token (AGENTD_TOKEN, else `token` file, else a new
 * one saved with mode 600) and the default workspace, copied from the package's `defaults/workspace` on
 * first start, never overwriting a file that is already there.
 */
export function prepareStateDir(home: string, envToken: string | undefined): StateDir {
  const workspaceDir = seedWorkspace(home);
  if (envToken) return { home, workspaceDir, token: envToken, tokenGenerated: false };
  const tokenPath = join(home, 'token');
  if (existsSync(tokenPath)) {
    const saved = readFileSync(tokenPath, 'utf8').trim();
    if (saved.length >= 16) return { home, workspaceDir, token: saved, tokenGenerated: false };
  }
  const token = newGatewayToken();
  writeFileSync(tokenPath, `${token}\n`, { mode: 0o600 });
  chmodSync(tokenPath, 0o600);
  return { home, workspaceDir, token, tokenGenerated: true };
}

/**
 * 24 random bytes in base64url, drawn again while the text begins with `-`: such a token passed as
 * `--token <token>` reads as options to command-line parsers (commander's root took `-c…` as `--config`).
 */
export function newGatewayToken(random: (size: number) => Buffer = randomBytes): string {
  for (;;) {
    const token = random(24).toString('base64url');
    if (!token.startsWith('-')) return token;
  }
}

/**
 * Creates `$AGENTD_HOME` (mode 700) and copies the default workspace into it once; returns the workspace's
 * path. Files the user already put there (say, skills/ before the first start) are kept; files the user
 * deletes later are not brought back. Commands that read the workspace without starting a runtime
 * (`agentd skills …`) seed it too, so a fresh home shows what a server on it would.
 */
export function seedWorkspace(home: string): string {
  mkdirSync(home, { recursive: true, mode: 0o700 });
  // The state dir holds the token and the database: nobody but the owner needs to list or enter it.
  chmodSync(home, 0o700);
  const workspaceDir = join(home, 'workspace');
  const seededMarker = join(workspaceDir, '.agentd-seeded');
  if (!existsSync(seededMarker)) {
    mkdirSync(workspaceDir, { recursive: true });
    const defaults = join(packageRoot(), 'defaults', 'workspace');
    if (existsSync(defaults))
      cpSync(defaults, workspaceDir, { recursive: true, force: false, errorOnExist: false });
    writeFileSync(
      seededMarker,
      'The default workspace was copied here; delete this file to copy missing defaults again.\n',
    );
  }
  return workspaceDir;
}
