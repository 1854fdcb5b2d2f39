import { isLoopbackAddress } from './connection.js';

const loopbackHosts = new Set(['127.0.0.1', '::1', 'localhost']);
/** Loopback names as they appear in a Host header (URL hostnames keep IPv6 brackets). */
const loopbackHostNames = new Set(['127.0.0.1', 'localhost', '[::1]']);

/** `name[:port]` → lower-case hostname (IPv6 in brackets) and port ('' when absent); undefined if malformed. */
export function parseHostHeader(value: string): { hostname: string; port: string } | undefined {
  try {
    const url = new URL(`http://${value}`);
    if (url.username || url.password || url.pathname !== '/' || url.search || url.hash) return undefined;
    // URL drops `:80`, the default port; the header said it, so keep it for the comparison.
    const port = url.port || (/:80$/.test(value) ? '80' : '');
    return { hostname: url.hostname.toLowerCase(), port };
  } catch {
    return undefined;
  }
}

/** Whether a bind address is loopback (where `--no-auth` is allowed and the Host header is checked). */
export function isLoopbackHost(host: string): boolean {
  return loopbackHosts.has(host) || isLoopbackAddress(host);
}

/**
 * Whether a Host header names this loopback server itself: a loopback name and the port it listens on. A
 * browser page can point any DNS name at 127.0.0.1 (DNS rebinding), but it cannot change the Host header its
 * requests carry.
 */
export function namesLoopbackServer(
  parsed: { hostname: string; port: string } | undefined,
  listeningPort: string,
): boolean {
  if (!parsed) return false;
  return loopbackHostNames.has(parsed.hostname) && (parsed.port || '80') === listeningPort;
}
