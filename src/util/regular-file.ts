import { constants } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';

/** Bytes read at a time once a file turns out larger than it was when opened. */
const growthChunkBytes = 16 * 1024;

/**
 * Opens a file the agent may have made for reading, if it is a regular file: opened without blocking
 * (opening a FIFO for reading waits for a writer otherwise) and checked on the open handle, so a path
 * swapped after an earlier look-up is caught too. Undefined for anything else (a FIFO, a device, a
 * directory); a missing file rejects with ENOENT. The caller closes the handle.
 */
export async function openRegularFile(
  path: string,
): Promise<{ handle: FileHandle; size: number } | undefined> {
  const handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const info = await handle.stat();
    if (info.isFile()) return { handle, size: info.size };
  } catch (error) {
    await handle.close();
    throw error;
  }
  await handle.close();
  return undefined;
}

/**
 * The file's bytes from its start, at most `maxBytes + 1` of them: a result longer than `maxBytes` means the
 * file is larger, however it grew after `size` (its size when opened) was read.
 */
export async function readAtMost(handle: FileHandle, size: number, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  let wanted = size + 1;
  while (total <= maxBytes) {
    const chunk = Buffer.allocUnsafe(Math.min(wanted, maxBytes + 1 - total));
    const { bytesRead } = await handle.read(chunk, 0, chunk.length, total);
    chunks.push(chunk.subarray(0, bytesRead));
    total += bytesRead;
    // A regular file reads short only at its end: one read for a file that did not grow since it was opened.
    if (bytesRead < chunk.length) break;
    wanted = growthChunkBytes;
  }
  return Buffer.concat(chunks, total);
}

/**
 * A file the agent may have made, whole, if it is a regular file of at most `maxBytes` (see
 * `openRegularFile`); else why not, with its size when it was already too large when opened. A missing file
 * rejects with ENOENT.
 */
export async function readRegularFile(
  path: string,
  maxBytes: number,
): Promise<{ bytes: Buffer } | { refused: 'not a regular file' } | { refused: 'too large'; size?: number }> {
  const opened = await openRegularFile(path);
  if (!opened) return { refused: 'not a regular file' };
  try {
    if (opened.size > maxBytes) return { refused: 'too large', size: opened.size };
    const bytes = await readAtMost(opened.handle, opened.size, maxBytes);
    return bytes.length > maxBytes ? { refused: 'too large' } : { bytes };
  } finally {
    await opened.handle.close();
  }
}
