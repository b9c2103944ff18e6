"""Model definitions (legacy Keras via trainer._keras).

Both models take any input shape (H, W, C) and output logits.
"""

from __future__ import annotations

from trainer._keras import keras, tf

layers = keras.layers


def build(name: str, input_shape, num_classes: int = 10) -> keras.Model:
    if name == "small_cnn":
        return small_cnn(input_shape, num_classes)
    if name == "resnet56":
        return cifar_resnet(56, input_shape, num_classes)
    raise ValueError(f"unknown model {name!r}")


def small_cnn(input_shape, num_classes: int = 10) -> keras.Model:
    """Two conv blocks and a dense head: seconds per epoch on digits on 2 cores."""
    inputs = keras.Input(shape=input_shape)
    x = layers.Conv2D(32, 3, padding="same", activation="relu")(inputs)
    x = layers.Conv2D(32, 3, padding="same", activation="relu")(x)
    x = layers.MaxPooling2D(2, padding="same")(x)
    x = layers.Conv2D(64, 3, padding="same", activation="relu")(x)
    x = layers.MaxPooling2D(2, padding="same")(x)
    x = layers.Flatten()(x) if _flat_size(x) <= 4096 else layers.GlobalAveragePooling2D()(x)
    x = layers.Dense(128, activation="relu")(x)
    outputs = layers.Dense(num_classes)(x)
    return keras.Model(inputs, outputs, name="small_cnn")


def _flat_size(x) -> int:
    size = 1
    for d in x.shape[1:]:
        if d is None:  # variable input size: only global pooling fits
            return 1 << 62
        size *= int(d)
    return size


class ZeroPadShortcut(layers.Layer):
    """Parameter-free shortcut (option A of He et al. 2015): subsample by
    ``stride`` and zero-pad the channels up to ``filters``."""

    def __init__(self, filters: int, stride: int, **kwargs):
        super().__init__(**kwargs)
        self.filters = filters
        self.stride = stride

    def call(self, x):
        if self.stride > 1:
            x = x[:, :: self.stride, :: self.stride, :]
        extra = self.filters - x.shape[-1]
        if extra > 0:
            x = tf.pad(x, [[0, 0], [0, 0], [0, 0], [extra // 2, extra - extra // 2]])
        return x

    def get_config(self):
        return {**super().get_config(), "filters": self.filters, "stride": self.stride}


def cifar_resnet(depth: int, input_shape, num_classes: int = 10, weight_decay: float = 1e-4) -> keras.Model:
    """CIFAR ResNet (He et al. 2015, section 4.2): a 3x3 conv, three stages of
    (depth - 2) / 6 basic blocks with 16, 32 and 64 filters, global average
    pooling and a dense layer. Shortcuts are parameter-free, so ResNet-56 has
    exactly 55 Conv2D layers and 1 Dense layer."""
    if (depth - 2) % 6:
        raise ValueError(f"CIFAR ResNet depth must be 6n + 2, got {depth}")
    blocks = (depth - 2) // 6
    reg = keras.regularizers.l2(weight_decay)

    def conv(filters, stride=1):
        return layers.Conv2D(
            filters, 3, strides=stride, padding="same", use_bias=False,
            kernel_initializer="he_normal", kernel_regularizer=reg,
        )

    def bn():
        return layers.BatchNormalization(momentum=0.9, epsilon=1e-5)

    inputs = keras.Input(shape=input_shape)
    x = conv(16)(inputs)
    x = layers.ReLU()(bn()(x))
    for stage, filters in enumerate((16, 32, 64)):
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            y = conv(filters, stride)(x)
            y = layers.ReLU()(bn()(y))
            y = conv(filters)(y)
            y = bn()(y)
            shortcut = x if stride == 1 and x.shape[-1] == filters else ZeroPadShortcut(filters, stride)(x)
            x = layers.ReLU()(layers.Add()([y, shortcut]))
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(num_classes, kernel_regularizer=reg)(x)
    return keras.Model(inputs, outputs, name=f"resnet{depth}")
