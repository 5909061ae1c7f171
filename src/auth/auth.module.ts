import { Module } from '@nestjs/common';
import { AuthController } from './auth.controller.js';

/** API keys and scopes: the hook is registered by `configureApp`; this module serves `GET /whoami`. */
@Module({ controllers: [AuthController] })
export class AuthModule {}
