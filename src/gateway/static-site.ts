import { createReadStream, existsSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, join, normalize, resolve, sep } from 'node:path';

const contentTypes: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
};

/**
 * The page talks only to its own origin (assets and the gateway WebSocket); nothing inline, no framing.
 * `connect-src` names ws:/wss: because older browsers do not count a same-host WebSocket as 'self'.
 */
const dashboardContentSecurityPolicy =
  "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

export interface StaticSite {
  /** Serves the request when it names a file of the site; false when the site has nothing at that path. */
  handle(request: IncomingMessage, response: ServerResponse): boolean;
}

/**
 * Serves a built single-page site from `dir`: `/` is `index.html` (never cached, since it names the hashed
 * assets), `/assets/*` are immutable. Paths are decoded and normalised, and anything resolving outside `dir`
 * (`..`, encoded slashes, NUL) is not served.
 */
export function createStaticSite(options: { dir: string }): StaticSite {
  const root = resolve(options.dir);
  const fileFor = (pathname: string): string | undefined => {
    let decoded: string;
    try {
      decoded = decodeURIComponent(pathname);
    } catch {
      return undefined;
    }
    if (decoded.includes('\0') || decoded.includes('\\')) return undefined;
    const relative = decoded === '/' ? 'index.html' : normalize(decoded).replace(/^([/\\])+/, '');
    const path = resolve(join(root, relative));
    if (path !== root && !path.startsWith(`${root}${sep}`)) return undefined;
    try {
      return statSync(path).isFile() ? path : undefined;
    } catch {
      return undefined;
    }
  };

  return {
    handle(request, response) {
      if (request.method !== 'GET' && request.method !== 'HEAD') return false;
      if (!existsSync(root)) return false;
      const url = new URL(request.url ?? '/', 'http://gateway');
      const path = fileFor(url.pathname);
      if (!path) return false;
      const isIndex = path === join(root, 'index.html');
      const size = statSync(path).size;
      response.writeHead(200, {
        'content-type': contentTypes[extname(path)] ?? 'application/octet-stream',
        'content-length': size,
        'content-security-policy': dashboardContentSecurityPolicy,
        'x-content-type-options': 'nosniff',
        'referrer-policy': 'no-referrer',
        'x-frame-options': 'DENY',
        'cache-control': isIndex
          ? 'no-store'
          : path.startsWith(`${join(root, 'assets')}${sep}`)
            ? 'public, max-age=31536000, immutable'
            : 'no-cache',
      });
      if (request.method === 'HEAD') {
        response.end();
        return true;
      }
      createReadStream(path)
        .on('error', () => response.destroy())
        .pipe(response);
      return true;
    },
  };
}
