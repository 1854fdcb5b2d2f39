import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { access, type FileHandle, lstat, open, rename, unlink } from 'node:fs/promises';
import path from 'node:path';
import { SystemError } from './errors.js';

/**
 * The code of a file write the file system refused for want of room or permission to grow: a full disk
 * (ENOSPC), a used-up quota (EDQUOT), the file-size limit (EFBIG) or a read-only file system (EROFS). The
 * file is left as it was. Retryable for a full disk or quota (space may be freed), not for the others.
 * Not `STORE_UNAVAILABLE`: that one says agentd's database cannot be written, which this does not.
 */
export const fileNotWrittenCode = 'FILE_NOT_WRITTEN';

const refusals: Readonly<Record<string, { why: string; retryable: boolean }>> = {
  ENOSPC: { why: 'the disk is full', retryable: true },
  EDQUOT: { why: 'the disk quota is used up', retryable: true },
  EFBIG: { why: 'it would be larger than the file-size limit allows', retryable: false },
  EROFS: { why: 'the file system is read-only', retryable: false },
};

/**
 * `error` as a `FILE_NOT_WRITTEN` SystemError when the file system refused the write for one of the reasons
 * above (naming the file as `shown`, never by its absolute path); any other error unchanged.
 */
export function asFileNotWritten(error: unknown, shown: string): unknown {
  const errno = (error as NodeJS.ErrnoException | null)?.code;
  const refusal = typeof errno === 'string' ? refusals[errno] : undefined;
  if (!refusal) return error;
  return new SystemError({
    code: fileNotWrittenCode,
    message: `Could not write ${shown}: ${refusal.why} (${errno}). The file was left as it was.`,
    retryable: refusal.retryable,
    details: { path: shown, reason: errno },
    cause: error,
  });
}

/** A temporary name beside `target`, unique, hidden, short enough for any file system (≤ 255 bytes). */
function temporaryPath(target: string): string {
  let name = path.basename(target);
  while (Buffer.byteLength(name) > 200) name = name.slice(0, -1);
  return path.join(path.dirname(target), `.${name}.${randomBytes(6).toString('hex')}.tmp`);
}

/**
 * Replaces `target` with `data` whole or not at all: writes a new file beside it (created exclusively, with
 * the mode of the file it replaces, and its owner where the process may set it), syncs it, renames it over
 * `target`, then syncs the directory (best effort: some platforms refuse to open or sync one). On any
 * failure the temporary file is removed and `target` keeps its previous content; a refusal for want of
 * room is a `FILE_NOT_WRITTEN` error. A file the process may not write to is refused as before.
 *
 * `target` should already be resolved through symbolic links: a link at `target` itself is replaced by
 * the new file, never followed. A kill mid-write leaves `target` intact and a `.<name>.<hex>.tmp` beside it.
 */
export async function writeFileAtomically(
  target: string,
  data: string | Uint8Array,
  options: { shown?: string } = {},
): Promise<void> {
  const shown = options.shown ?? path.basename(target);
  // The file being replaced (a link is not looked through), for its owner and mode.
  const existing = await lstat(target).then(
    (info) => (info.isFile() ? info : undefined),
    () => undefined,
  );
  // A file we may not write to stays refused (EACCES, EROFS), as an in-place write would be: the rename
  // needs only the directory's permission.
  if (existing) {
    try {
      await access(target, constants.W_OK);
    } catch (error) {
      throw asFileNotWritten(error, shown);
    }
  }
  // Set-id and sticky bits are dropped, as an in-place write by anyone but root drops them.
  const mode = existing ? existing.mode & 0o777 : 0o666;
  const temporary = temporaryPath(target);
  let handle: FileHandle | undefined;
  try {
    handle = await open(temporary, 'wx', mode);
    if (existing) {
      // Its owner, where allowed (root; a group of ours): a file agentd's user does not own stays its owner's.
      if (existing.uid !== process.getuid?.() || existing.gid !== process.getgid?.())
        await handle.chown(existing.uid, existing.gid).catch(() => undefined);
      // The umask narrowed the mode at creation: set the replaced file's own.
      await handle.chmod(mode);
    }
    await handle.writeFile(data, typeof data === 'string' ? 'utf8' : undefined);
    await handle.sync();
    await handle.close();
    handle = undefined;
    await rename(temporary, target);
  } catch (error) {
    await handle?.close().catch(() => undefined);
    await unlink(temporary).catch(() => undefined);
    throw asFileNotWritten(error, shown);
  }
  await syncDirectory(path.dirname(target));
}

/** Makes a rename in `directory` durable where the platform allows it; the rename itself has happened. */
async function syncDirectory(directory: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(directory, 'r');
    await handle.sync();
  } catch {
    // Windows cannot open a directory, some file systems refuse to sync one (EINVAL, EISDIR, EPERM).
  } finally {
    await handle?.close().catch(() => undefined);
  }
}
