import { generateKeyPairSync, sign } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { deviceAuthPayload, deviceIdForPublicKey } from '../../src/gateway/index.js';
import { FrameClient } from '../gateway/helpers.js';
import { type StartedGateway, startGateway } from './helpers.js';

/** An OpenClaw device (Ed25519 key pair) that signs its connect the way OpenClaw clients do. */
function createDevice() {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const raw = publicKey.export({ format: 'der', type: 'spki' }).subarray(-32);
  const deviceId = deviceIdForPublicKey(raw);
  return {
    deviceId,
    block(nonce: string, scopes: string[], token: string) {
      const signedAt = Date.now();
      const payload = deviceAuthPayload('v3', {
        deviceId,
        clientId: 'cli',
        clientMode: 'cli',
        role: 'operator',
        scopes,
        signedAtMs: signedAt,
        token,
        nonce,
        platform: 'linux',
      });
      const signature = sign(null, Buffer.from(payload), privateKey).toString('base64url');
      return { id: deviceId, publicKey: raw.toString('base64url'), signature, signedAt, nonce };
    },
  };
}

async function connectDevice(
  url: string,
  device: ReturnType<typeof createDevice>,
  scopes: string[],
  auth: { token?: string; deviceToken?: string },
) {
  const client = await FrameClient.open(url);
  const challenge = await client.nextEvent('connect.challenge');
  const response = await client.request('connect', {
    minProtocol: 4,
    maxProtocol: 4,
    client: { id: 'cli', version: '1', platform: 'linux', mode: 'cli' },
    role: 'operator',
    scopes,
    auth,
    device: device.block(challenge.payload.nonce, scopes, auth.token ?? auth.deviceToken ?? ''),
  });
  return { client, response };
}

let gateway: StartedGateway | undefined;

afterEach(async () => {
  await gateway?.runtime.close();
  gateway = undefined;
});

describe('device tokens carry the scopes the device was paired with', () => {
  it('a device paired read/write cannot reconnect as operator.admin, before or after a restart', async () => {
    gateway = await startGateway();
    const device = createDevice();
    const paired = await connectDevice(gateway.url, device, ['operator.read', 'operator.write'], {
      token: gateway.token,
    });
    expect(paired.response.ok).toBe(true);
    expect(paired.response.payload.auth.method).toBe('token');
    const deviceToken = paired.response.payload.auth.deviceToken as string;
    expect(deviceToken).toEqual(expect.any(String));
    paired.client.close();
    await paired.client.closed;

    const attempt = async () => {
      const { client, response } = await connectDevice(
        gateway!.url,
        device,
        ['operator.read', 'operator.write', 'operator.admin'],
        { deviceToken },
      );
      expect(response.ok).toBe(true);
      expect(response.payload.auth.method).toBe('device-token');
      expect(response.payload.auth.scopes.sort()).toEqual(['operator.read', 'operator.write']);
      // The same token again: the pairing is not widened by asking.
      expect(response.payload.auth.deviceToken).toBe(deviceToken);
      const inject = await client.request('chat.inject', {
        sessionKey: 'agent:main:main',
        message: 'planted by a read/write device',
      });
      expect(inject.ok).toBe(false);
      expect(inject.error.code).toBe('FORBIDDEN');
      expect((await client.request('health', {})).ok).toBe(true);
      client.close();
      await client.closed;
    };
    await attempt();

    const { home } = gateway;
    await gateway.runtime.close();
    gateway = await startGateway({ home });
    await attempt();
  });

  it('a device token does not work for another device', async () => {
    gateway = await startGateway();
    const device = createDevice();
    const other = createDevice();
    const paired = await connectDevice(gateway.url, device, ['operator.read'], { token: gateway.token });
    const deviceToken = paired.response.payload.auth.deviceToken as string;
    paired.client.close();
    const stolen = await connectDevice(gateway.url, other, ['operator.read'], { deviceToken });
    expect(stolen.response.ok).toBe(false);
    expect(stolen.response.error.details.code).toBe('AUTH_DEVICE_TOKEN_MISMATCH');
  });

  it('the shared token re-pairs a device with the scopes it asks for then', async () => {
    gateway = await startGateway();
    const device = createDevice();
    const first = await connectDevice(gateway.url, device, ['operator.read'], { token: gateway.token });
    const readToken = first.response.payload.auth.deviceToken as string;
    first.client.close();
    const again = await connectDevice(gateway.url, device, ['operator.admin'], { token: gateway.token });
    const adminToken = again.response.payload.auth.deviceToken as string;
    expect(adminToken).not.toBe(readToken);
    again.client.close();
    const withOld = await connectDevice(gateway.url, device, ['operator.read'], { deviceToken: readToken });
    expect(withOld.response.ok).toBe(false);
    const withNew = await connectDevice(gateway.url, device, ['operator.admin'], {
      deviceToken: adminToken,
    });
    expect(withNew.response.payload.auth.scopes).toEqual(['operator.admin']);
    withNew.client.close();
  });
});
