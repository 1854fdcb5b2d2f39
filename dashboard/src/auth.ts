const storageKey = 'agentd.token';

/**
 * The token comes from the URL fragment (`#token=…`, which browsers never send to a server) or the sign-in
 * form, and is kept in sessionStorage: for this tab only, gone when it closes. The fragment is removed from
 * the address bar at once so it does not linger in history or screenshots.
 */
export function takeTokenFromLocation(): string | undefined {
  const hash = window.location.hash.replace(/^#/, '');
  const params = new URLSearchParams(hash);
  const token = params.get('token');
  if (!token) return undefined;
  sessionStorage.setItem(storageKey, token);
  history.replaceState(null, '', `${window.location.pathname}${window.location.search}#world`);
  return token;
}

export function storedToken(): string | undefined {
  return sessionStorage.getItem(storageKey) ?? undefined;
}

export function storeToken(token: string): void {
  sessionStorage.setItem(storageKey, token);
}

export function forgetToken(): void {
  sessionStorage.removeItem(storageKey);
}
