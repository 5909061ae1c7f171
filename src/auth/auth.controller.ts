import { Controller, Get, Req } from '@nestjs/common';
import { ApiProperty, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { ApiErrors } from '../common/api-errors.decorator.js';
import { AppConfig } from '../config/app-config.js';
import { SCOPES, type Scope } from '../config/api-keys.js';
import { Scopes } from './scopes.decorator.js';

/** Who the caller is, as the service sees it. */
export class WhoAmIDto {
  @ApiProperty({ description: 'true when the service has API keys configured; false: every route is open', example: true })
  authentication: boolean;
  @ApiProperty({ type: String, nullable: true, description: 'The name of the key the request carried (null when keys are off)', example: 'ops' })
  name: string | null;
  @ApiProperty({
    enum: SCOPES,
    enumName: 'Scope',
    isArray: true,
    description: 'What the caller may do (every scope when keys are off)',
    example: ['read', 'admin'],
  })
  scopes: Scope[];
}

@ApiTags('operations')
@Controller()
export class AuthController {
  constructor(private readonly config: AppConfig) {}

  /**
   * The name and scopes of the API key the request carries (any known key may ask), so that a
   * client such as the admin console can show what its key may do. With no keys configured it
   * answers `authentication: false` and every scope.
   */
  @Get('whoami')
  @Scopes()
  @ApiErrors({ 401: ['UNAUTHORIZED'], 429: ['RATE_LIMITED'] })
  whoami(@Req() request: FastifyRequest): WhoAmIDto {
    if (this.config.apiKeys.length === 0) return { authentication: false, name: null, scopes: [...SCOPES] };
    const principal = request.principal!;
    return { authentication: true, name: principal.name, scopes: SCOPES.filter((s) => principal.scopes.has(s)) };
  }
}
