/**
 * Codes the gateway puts on the wire besides agentd's own (`util/errors.ts`): the detail codes OpenClaw's
 * clients branch on (`error.details.code`), named as OpenClaw's gateway names them, and the top-level code
 * of an OpenClaw response refused for load.
 */
export const GatewayErrorCodes = {
  /** Too many requests in flight on one connection; retry later. */
  unavailable: 'UNAVAILABLE',
  missingScope: 'MISSING_SCOPE',
  protocolMismatch: 'PROTOCOL_MISMATCH',
  roleUnsupported: 'ROLE_UNSUPPORTED',
  authTokenMismatch: 'AUTH_TOKEN_MISMATCH',
  authDeviceTokenMismatch: 'AUTH_DEVICE_TOKEN_MISMATCH',
  authTokenMissing: 'AUTH_TOKEN_MISSING',
  deviceAuthNonceRequired: 'DEVICE_AUTH_NONCE_REQUIRED',
  deviceAuthNonceMismatch: 'DEVICE_AUTH_NONCE_MISMATCH',
  deviceAuthSignatureInvalid: 'DEVICE_AUTH_SIGNATURE_INVALID',
  deviceAuthSignatureExpired: 'DEVICE_AUTH_SIGNATURE_EXPIRED',
  deviceAuthDeviceIdMismatch: 'DEVICE_AUTH_DEVICE_ID_MISMATCH',
  deviceAuthPublicKeyInvalid: 'DEVICE_AUTH_PUBLIC_KEY_INVALID',
} as const;
