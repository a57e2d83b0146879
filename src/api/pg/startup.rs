//! A connection's start: TLS where the peer is off loopback, the API key as the password
//! (when keys are configured), the database the startup names, then the session's parameters
//! and its cancel key.

use super::commands::SERVER_VERSION;
use super::state::{PgState, Session};
use crate::api::auth::Caller;
use crate::service::databases::DEFAULT_DATABASE;
use async_trait::async_trait;
use futures_util::{Sink, SinkExt};
use pgwire::api::auth::{
    DefaultServerParameterProvider, StartupHandler, finish_authentication, protocol_negotiation,
    save_startup_parameters_to_metadata,
};
use pgwire::api::{
    ClientInfo, METADATA_DATABASE, PgWireConnectionState, PidSecretKeyGenerator, RandomPidSecretKeyGenerator,
};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::startup::Authentication;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use std::fmt::Debug;
use std::sync::Arc;

/// Starts connections.
pub(super) struct Startup {
    state: Arc<PgState>,
    pids: RandomPidSecretKeyGenerator,
    parameters: DefaultServerParameterProvider,
}

impl Startup {
    pub(super) fn new(state: Arc<PgState>) -> Startup {
        let mut parameters = DefaultServerParameterProvider::default();
        parameters.server_version = SERVER_VERSION.to_owned();
        parameters.is_superuser = false;
        parameters.default_transaction_read_only = true;
        parameters.time_zone = "UTC".to_owned();
        Startup { state, pids: RandomPidSecretKeyGenerator::default(), parameters }
    }

    /// Lets the client in on database `db` (with `caller`'s key, when keys are configured).
    async fn admit<C>(&self, client: &mut C, caller: Option<Caller>) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let db = client.metadata().get(METADATA_DATABASE).cloned().unwrap_or_else(|| DEFAULT_DATABASE.to_owned());
        let reachable = caller.as_ref().is_none_or(|c| c.role_in(&db).is_some());
        if !reachable || self.state.shared.databases.get(&db).is_none() {
            return Err(fatal("3D000", format!("database \"{db}\" does not exist")));
        }
        let (pid, secret) = self.pids.generate(client);
        client.set_pid_and_secret_key(pid, secret.clone());
        let (cancel, registered) = self.state.cancels.register((pid, secret.to_bytes()));
        client.session_extensions().insert(Session { db, cancel, _registered: registered });
        finish_authentication(client, &self.parameters).await
    }
}

fn fatal(code: &str, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new("FATAL".to_owned(), code.to_owned(), message)))
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(&self, client: &mut C, message: PgWireFrontendMessage) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match message {
            PgWireFrontendMessage::Startup(ref startup) => {
                protocol_negotiation(client, startup).await?;
                save_startup_parameters_to_metadata(client, startup);
                if !client.is_secure() && !client.socket_addr().ip().to_canonical().is_loopback() {
                    return Err(fatal(
                        "28000",
                        "connections from other hosts must use TLS (sslmode=require): the password is an API key"
                            .to_owned(),
                    ));
                }
                if !self.state.shared.access.enabled() {
                    return self.admit(client, None).await;
                }
                client.set_state(PgWireConnectionState::AuthenticationInProgress);
                client.send(PgWireBackendMessage::Authentication(Authentication::CleartextPassword)).await?;
                Ok(())
            }
            PgWireFrontendMessage::PasswordMessageFamily(message) => {
                if !matches!(client.state(), PgWireConnectionState::AuthenticationInProgress) {
                    return Err(PgWireError::NoAuthenticationInProgress);
                }
                let password = message.into_password()?;
                match self.state.shared.access.keys.verify(password.password.as_bytes()) {
                    Some(caller) => self.admit(client, Some(caller)).await,
                    None => {
                        let user = client.metadata().get("user").cloned().unwrap_or_default();
                        Err(fatal(
                            "28P01",
                            format!("password authentication failed for user \"{user}\": not an API key"),
                        ))
                    }
                }
            }
            _ => Ok(()),
        }
    }
}
